"""The XLA FFI C ABI seen from Python and Numba.

- :mod:`.abi`: struct offsets, dtype codes, the API version handlers report;
- :mod:`.naming`: content-derived target names (code *and* compile options);
- :mod:`.registry`: one registration per name, after the CPU backend is up;
- :mod:`._pyerror`: ``XLA_FFI_Error`` creation for handler error paths;
- :mod:`.intrinsics`: Numba intrinsics for generated ``@cfunc`` handlers (imports
  Numba, so it is never imported from here).

Importing this package imports neither JAX nor Numba.
"""

from __future__ import annotations

from .abi import API_MAJOR, API_MINOR, DTYPE_CODES, dtype_code, dtype_name
from .naming import kernel_fingerprint, target_name
from .registry import register_cpu_target, registered_targets

__all__ = [
    "API_MAJOR",
    "API_MINOR",
    "DTYPE_CODES",
    "dtype_code",
    "dtype_name",
    "kernel_fingerprint",
    "register_cpu_target",
    "registered_targets",
    "target_name",
]
