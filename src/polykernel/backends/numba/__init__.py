"""The ``numba`` backend: ``@numba.njit`` kernels inside XLA on the CPU, GIL-free.

- :mod:`.kernel`: :func:`numba_kernel` / :class:`NumbaKernel`;
- :mod:`.fingerprint`, :mod:`.objects`, :mod:`.provenance`: the kernel's content
  identity (code, constants, closures, globals, compile options);
- :mod:`.compile`, :mod:`.entry`, :mod:`.artifact`, :mod:`.rewrite`: the handler —
  the kernel compiled for a call signature, the LLVM IR around it, one
  self-contained module naming what it needs from its process;
- :mod:`.shared`: that module as a shared object calling polykernel's runtime
  library (:mod:`polykernel.native.runtime`), loaded with :mod:`ctypes`;
- :mod:`.build`, :mod:`.making`, :mod:`.cache`, :mod:`.handler`: load it (or build
  it), the on-disk index from target name to artefact;
- :mod:`.backend`: the backend's protocol object (revival in a new process).

Importing this package imports neither Numba nor llvmlite.
"""

from __future__ import annotations

from .kernel import NumbaKernel, numba_kernel

__all__ = ["NumbaKernel", "numba_kernel"]
