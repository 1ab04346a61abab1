"""Content-derived FFI target names.

XLA refuses a second handler under an existing name, and a name that outlives a
change of the code it stands for silently runs stale machine code (brainevent's bug
B2: two kernels differing only in ``error_model`` shared one handler). So a target
name is a SHA-256 over everything that decides what the handler does — for a Numba
kernel, its content fingerprint
(:func:`polykernel.backends.numba.fingerprint.kernel_fingerprint`), the call
signature the handler checks, the handler template version and the FFI API version.

Shapes are not part of it: handlers read them from the call frame at run time.
Names are the same in every process (no counters, no addresses, no hash seeds), so
``jax.export`` artefacts and JAX's persistent compilation cache can refer to them.
"""

from __future__ import annotations

import hashlib

__all__ = ["target_name"]


def target_name(prefix: str, *parts: str) -> str:
    """A valid FFI target name (and Python identifier) from a prefix and parts.

    Example:
        >>> from polykernel.ffi.naming import target_name
        >>> target_name("pk_numba", "abc", "f32[1]")[:9]
        'pk_numba_'
    """
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:24]
    return f"{prefix}_{digest}"
