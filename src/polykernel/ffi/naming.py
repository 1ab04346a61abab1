"""Content-derived FFI target names.

XLA refuses a second handler under an existing name, and a name that outlives a
change of the code it stands for silently runs stale machine code (brainevent's bug
B2: two kernels differing only in ``error_model`` shared one handler). So a target
name is a SHA-256 over everything that decides what the handler does:

- the kernel's content fingerprint (:mod:`.fingerprint`: code, constants, closure
  values and globals, recursively, plus the dispatcher's compile options), the
  Numba version and the Numba settings that change code;
- the call signature the handler checks (dtypes, ranks, attribute names/dtypes);
- the handler template version and the FFI API version.

Shapes are not part of it: handlers read them from the call frame at run time.
Names are the same in every process (no counters, no addresses, no hash seeds), so
``jax.export`` artefacts and JAX's persistent compilation cache can refer to them.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .fingerprint import Unfingerprintable, fingerprint

__all__ = ["Unfingerprintable", "kernel_fingerprint", "target_name"]


def kernel_fingerprint(kernel: Any) -> str:
    """SHA-256 hex digest over a jitted kernel's code *and* compile options.

    Raises:
        Unfingerprintable: the kernel reaches an object that cannot be hashed by
            content (it must then not be cached across processes).

    Example:
        >>> import numba
        >>> f = numba.njit(lambda x: x)
        >>> g = numba.njit(error_model="numpy")(lambda x: x)
        >>> kernel_fingerprint(f) != kernel_fingerprint(g)
        True
    """
    settings = ""
    try:
        import numba

        cfg = numba.config
        settings = f"numba {numba.__version__} {cfg.BOUNDSCHECK} {cfg.OPT}"
    except ImportError:  # pragma: no cover - fingerprints are only taken with numba
        pass
    return hashlib.sha256(f"{settings}\0{fingerprint(kernel)}".encode()).hexdigest()


def target_name(prefix: str, *parts: str) -> str:
    """A valid FFI target name (and Python identifier) from a prefix and parts.

    Example:
        >>> target_name("pk_numba", "abc", "f32[1]")[:9]
        'pk_numba_'
    """
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:24]
    return f"{prefix}_{digest}"
