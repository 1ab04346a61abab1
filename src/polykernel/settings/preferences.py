"""The reference API's process-wide ``config.*`` setters: backend, Numba, CUDA arch.

Each is a *setup-time* control, like the reference's: call it before the hot loop or
before other threads compile. A change that alters which code a primitive lowers to
reaches functions jitted earlier on their next call, through
``_jax_compat.bump_dispatch_epoch`` (never ``jax.clear_caches()``, which would drop
every compiled executable of the process).

Re-exported by :mod:`polykernel.config` and at top level.
"""

from __future__ import annotations

import threading

from .. import _jax_compat
from ..errors import BackendUnavailableError, KernelRegistrationError, KernelTypeError
from ..platforms import PLATFORMS, PlatformName

__all__ = [
    "clear_backends",
    "get_backend",
    "get_compute_capability",
    "get_numba_num_threads",
    "get_numba_parallel",
    "get_tuning_miss_warnings",
    "pinned_cuda_arches",
    "set_backend",
    "set_compute_capability",
    "set_numba_parallel",
    "set_tuning_miss_warnings",
]


_lock = threading.Lock()
_backends: dict[str, str] = {}  # set_backend() choices, platform -> backend
_numba_parallel = False
_numba_threads: int | None = None
_compute_capability: tuple[str, ...] | None = None  # digits, e.g. ("80", "90a")


# -- process-wide backend per platform (reference: config.set_backend) -----------------
def _check_platform(where: str, platform: object) -> str:
    if not isinstance(platform, str):
        raise KernelTypeError(
            f"polykernel.{where}: platform must be a string, one of {list(PLATFORMS)} "
            f"(got {type(platform).__name__}: {platform!r})."
        )
    if platform not in PLATFORMS:
        raise KernelRegistrationError(
            f"polykernel.{where}: unknown platform {platform!r}; expected one of "
            f"{list(PLATFORMS)}."
        )
    return platform


def set_backend(platform: PlatformName, backend: str | None) -> None:
    """Prefer ``backend`` on ``platform`` for every primitive that registered it.

    It is level 2 of dispatch's precedence (``docs/tuning.md``: after the call's
    ``backend=``, before the primitive's ``set_default`` and tuned entries); it
    applies only to primitives that registered ``backend`` for ``platform`` (others
    warn once and fall through). A change reaches functions jitted earlier on their
    next call. ``None`` clears the choice.

    This is a setup-time, process-wide control; for a thread-safe per-call choice
    pass ``backend=`` to the primitive instead.

    Raises:
        KernelTypeError: ``platform`` or ``backend`` is not a string (or ``None``).
        KernelRegistrationError: unknown platform, or an empty backend name.

    Example:
        >>> import polykernel as pk
        >>> pk.set_backend("cpu", "numba")
        >>> pk.get_backend("cpu")
        'numba'
        >>> pk.set_backend("cpu", None)
    """
    _check_platform("set_backend", platform)
    if backend is not None and not isinstance(backend, str):
        raise KernelTypeError(
            f"polykernel.set_backend: backend must be a string such as 'numba', or "
            f"None to clear (got {type(backend).__name__}: {backend!r})."
        )
    if backend == "":
        raise KernelRegistrationError(
            "polykernel.set_backend: backend cannot be an empty string; pass a "
            "backend name such as 'numba', or None to clear the choice."
        )
    with _lock:
        previous = _backends.get(platform)
        if backend is None:
            _backends.pop(platform, None)
        else:
            _backends[platform] = backend
    if previous != backend:
        _jax_compat.bump_dispatch_epoch()


def get_backend(platform: str) -> str | None:
    """Return the backend chosen with :func:`set_backend` for ``platform``, or None.

    Example:
        >>> import polykernel as pk
        >>> pk.get_backend("tpu") is None
        True
    """
    if not isinstance(platform, str):
        raise KernelTypeError(
            f"polykernel.get_backend: platform must be a string such as 'cpu' (got "
            f"{type(platform).__name__}: {platform!r})."
        )
    with _lock:
        return _backends.get(platform)


def clear_backends() -> None:
    """Forget every :func:`set_backend` choice (primitives use their own defaults).

    Example:
        >>> import polykernel as pk
        >>> pk.clear_backends()
    """
    with _lock:
        had_any = bool(_backends)
        _backends.clear()
    if had_any:
        _jax_compat.bump_dispatch_epoch()


# -- Numba parallel flag (reference: config.set_numba_parallel) -----------------------
def set_numba_parallel(parallel: bool = True, num_threads: int | None = None) -> None:
    """Record whether kernel generators should build parallel Numba kernels.

    Generators read the flag with :func:`get_numba_parallel` when they build a
    kernel (e.g. ``numba.njit(parallel=get_numba_parallel())``); kernels built
    before the call keep the mode they were built with. ``num_threads`` also calls
    ``numba.set_num_threads``, which affects every Numba function in the process.

    Raises:
        KernelTypeError: ``parallel`` is not a bool or ``num_threads`` not an int.
        KernelRegistrationError: ``num_threads`` is below 1 or above Numba's
            ``NUMBA_NUM_THREADS``.
        BackendUnavailableError: ``num_threads`` is given but Numba is not installed.

    Example:
        >>> import polykernel as pk
        >>> pk.set_numba_parallel(False)
        >>> pk.get_numba_parallel()
        False
    """
    global _numba_parallel, _numba_threads
    if not isinstance(parallel, bool):
        raise KernelTypeError(
            f"polykernel.set_numba_parallel: parallel must be True or False (got "
            f"{type(parallel).__name__}: {parallel!r})."
        )
    if num_threads is not None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int):
            raise KernelTypeError(
                f"polykernel.set_numba_parallel: num_threads must be an int or None "
                f"(got {type(num_threads).__name__}: {num_threads!r})."
            )
        if num_threads < 1:
            raise KernelRegistrationError(
                f"polykernel.set_numba_parallel: num_threads must be >= 1 (got "
                f"{num_threads})."
            )
        try:
            import numba
            from numba.core import config as numba_config
        except ImportError as err:
            raise BackendUnavailableError(
                "polykernel.set_numba_parallel(num_threads=...) needs Numba: "
                'pip install "polykernel[numba]".'
            ) from err
        # Numba sets its settings at import time (globals().update), unseen by a
        # type checker.
        limit = numba_config.NUMBA_NUM_THREADS  # pyright: ignore[reportAttributeAccessIssue]
        if num_threads > limit:
            raise KernelRegistrationError(
                f"polykernel.set_numba_parallel: num_threads must be at most {limit} "
                f"(NUMBA_NUM_THREADS, fixed when Numba starts; got {num_threads}). "
                "Raise NUMBA_NUM_THREADS in the environment before importing Numba."
            )
        numba.set_num_threads(num_threads)
    with _lock:
        _numba_parallel, _numba_threads = parallel, num_threads


def get_numba_parallel() -> bool:
    """Whether :func:`set_numba_parallel` asked for parallel Numba kernels.

    Example:
        >>> import polykernel as pk
        >>> isinstance(pk.get_numba_parallel(), bool)
        True
    """
    return _numba_parallel


def get_numba_num_threads() -> int | None:
    """The thread count given to :func:`set_numba_parallel`, or None.

    Example:
        >>> import polykernel as pk
        >>> pk.get_numba_num_threads() is None or pk.get_numba_num_threads() >= 1
        True
    """
    return _numba_threads


# -- CUDA target architectures (reference: config.set_compute_capability) -------------
def set_compute_capability(value: str | list[str] | None = None) -> None:
    """Pin the CUDA architectures native CUDA modules are compiled for.

    Accepts ``"8.6"``, ``"sm_86"``, ``"compute_86"``, ``"86"``, a comma-separated
    string or a list (a fat binary); ``None`` restores detection. An explicit
    ``cuda_arch`` option of a loader still wins; the pin wins over
    ``$POLYKERNEL_CUDA_ARCH`` and over detection.

    Raises:
        UnsupportedArchError: (a ``ValueError``) a value is not an architecture.
        KernelTypeError: ``value`` is not a string, a list of strings or None.

    Example:
        >>> import polykernel as pk
        >>> pk.config.set_compute_capability("8.6")
        >>> pk.config.get_compute_capability()
        ['sm_86']
        >>> pk.config.set_compute_capability(None)
    """
    global _compute_capability
    if value is None:
        arches = None
    else:
        from .cuda_arch import normalize_arch

        if isinstance(value, str):
            items = [value]
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            items = list(value)
        else:
            raise KernelTypeError(
                "polykernel.set_compute_capability: value must be a string such as "
                "'8.6' or 'sm_86', a list of such strings, or None (got "
                f"{type(value).__name__}: {value!r})."
            )
        parts = [p.strip() for item in items for p in str(item).split(",")]
        arches = tuple(dict.fromkeys(normalize_arch(p) for p in parts if p))
    with _lock:
        previous, _compute_capability = _compute_capability, arches or None
    if previous != _compute_capability:
        _jax_compat.bump_dispatch_epoch()  # generators may compile at lowering time


def get_compute_capability() -> list[str] | None:
    """The pinned architectures as ``['sm_86', ...]``, or None when detecting.

    Example:
        >>> import polykernel as pk
        >>> pk.config.get_compute_capability() is None
        True
    """
    pinned = _compute_capability
    return None if pinned is None else [f"sm_{a}" for a in pinned]


def pinned_cuda_arches() -> tuple[str, ...] | None:
    """The pin as normalised digits (``('86',)``) for the toolchain, or None."""
    return _compute_capability


# -- measured dispatch (our addition) ---------------------------------------------
_tuning_miss_warnings: bool | None = None  # None: $POLYKERNEL_TUNING_MISS_WARN decides


def set_tuning_miss_warnings(enabled: bool | None) -> None:
    """Warn once per key when a call finds no tuned entry (``None``: as
    ``$POLYKERNEL_TUNING_MISS_WARN`` says, off by default). Misses are counted
    either way (``polykernel tune --report``).

    Example:
        >>> import polykernel as pk
        >>> pk.config.set_tuning_miss_warnings(True)
        >>> pk.config.get_tuning_miss_warnings()
        True
        >>> pk.config.set_tuning_miss_warnings(None)
    """
    global _tuning_miss_warnings
    if enabled is not None and not isinstance(enabled, bool):
        raise KernelTypeError(
            f"polykernel.config.set_tuning_miss_warnings: enabled must be True, False "
            f"or None (got {type(enabled).__name__}: {enabled!r})."
        )
    _tuning_miss_warnings = enabled


def get_tuning_miss_warnings() -> bool:
    """Whether a call that finds no tuned entry warns (once per key)."""
    if _tuning_miss_warnings is not None:
        return _tuning_miss_warnings
    from .paths import env_flag

    return env_flag("POLYKERNEL_TUNING_MISS_WARN", default=False)
