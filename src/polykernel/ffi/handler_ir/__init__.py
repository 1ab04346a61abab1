"""XLA FFI handlers written directly as LLVM IR (llvmlite), for LLVM-based backends.

- :mod:`.signature`: what a handler checks (dtypes, ranks, attribute names/dtypes)
  and how half-precision buffers reach the kernel;
- :mod:`.frame`: loads from ``XLA_FFI_CallFrame`` at the offsets of :mod:`..abi`;
- :mod:`.checks`: the frame checks, reported through one error block;
- :mod:`.batch`: batch dims under ``vmap`` (size and broadcasting);
- :mod:`.half`, :mod:`.scratch`: float16/bfloat16 <-> float32 copies;
- :mod:`.pyerror`: error paths that take the GIL and let Python word messages;
- :mod:`.handler`: assembles the handler around a backend's kernel call.

The success path of a generated handler runs no Python and takes no GIL. Importing
this package (and :mod:`.signature`) imports nothing optional; the IR modules
import llvmlite (never Numba).
"""

from __future__ import annotations

from .signature import HALF_DTYPES, HALF_MODES, Signature

__all__ = ["HALF_DTYPES", "HALF_MODES", "Signature"]
