"""The XLA FFI C ABI seen from Python, and the one target registry.

- :mod:`.abi`: struct offsets, dtype codes, the API version handlers report;
- :mod:`.targets`: the one registry every FFI target polykernel registers goes
  through (identity, revival in a new process);
- :mod:`.naming`: content-derived target names;
- :mod:`.metadata`: ask a handler its API version and traits;
- :mod:`._pyerror`: ``XLA_FFI_Error`` creation for handler error paths;
- :mod:`.handler_ir`: LLVM IR of generated handlers (imports llvmlite, so it is
  never imported from here).

Importing this package imports neither JAX nor any backend.
"""

from __future__ import annotations

from .abi import API_MAJOR, API_MINOR, DTYPE_CODES, dtype_code, dtype_name
from .naming import target_name
from .targets import list_registered_targets, register

__all__ = [
    "API_MAJOR",
    "API_MINOR",
    "DTYPE_CODES",
    "dtype_code",
    "dtype_name",
    "list_registered_targets",
    "register",
    "target_name",
]
