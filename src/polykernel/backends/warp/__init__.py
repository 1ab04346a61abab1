"""NVIDIA Warp kernels as JAX calls: ``warp_kernel`` and the type helpers.

- :mod:`.types`: ``jaxtype_to_warptype``, ``jaxinfo_to_warpinfo`` (lazy Warp import);
- :mod:`.plan`: parameter mapping and the C layout of Warp's structs (pure);
- :mod:`.call_check`: checks of a call against the kernel's parameters;
- :mod:`.kernel`: :func:`warp_kernel` / :class:`WarpKernel`;
- :mod:`.cpu_target`, :mod:`.cpu_handler`, :mod:`.linked`: the GIL-free CPU FFI
  handler, named without a build, linked with Warp's CPU object into a shared
  object kept in the cache (:mod:`.cache`);
- :mod:`.revive`: its CPU targets registered again in a new process;
- :mod:`.gpu_target`, :mod:`.gpu_build`: Warp's ahead-of-time CUDA build run by
  the native GPU launcher;
- :mod:`.info`, :mod:`.backend`: its rows of ``polykernel info``, its protocol object.

Importing this package imports neither Warp nor llvmlite.
"""

from __future__ import annotations

from .kernel import WarpKernel, warp_kernel
from .types import jaxinfo_to_warpinfo, jaxtype_to_warptype

__all__ = ["WarpKernel", "jaxinfo_to_warpinfo", "jaxtype_to_warptype", "warp_kernel"]
