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

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .kernel import WarpKernel, warp_kernel
    from .types import jaxinfo_to_warpinfo, jaxtype_to_warptype

# Imported on first use: looking the backend up imports none of its modules.
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "WarpKernel": "kernel",
        "jaxinfo_to_warpinfo": "types",
        "jaxtype_to_warptype": "types",
        "warp_kernel": "kernel",
    },
)

__all__ = ["WarpKernel", "jaxinfo_to_warpinfo", "jaxtype_to_warptype", "warp_kernel"]
