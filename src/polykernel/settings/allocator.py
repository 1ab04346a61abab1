"""Opt-in tuning of the C allocator for large, short-lived XLA buffers.

Why this exists: on Linux with glibc, XLA's CPU runtime allocates every call's output
buffer with ``malloc``. A multi-megabyte buffer is served by ``mmap`` (or from a
per-thread heap that glibc trims when it is freed), so the *next* call gets fresh
pages and pays one page fault per 4 KiB on first touch. A single-threaded kernel that
writes a 4 MB output then spends most of its time in the kernel zeroing pages: here a
1e6-element float32 add costs ~0.9 ms through any custom call instead of ~0.13 ms.
Asking glibc to keep freed memory in the heap removes that cost for every custom call
(polykernel's or anyone's) and for XLA's own kernels.

The trade-off is that memory freed by the process is kept for reuse instead of being
returned to the operating system, so the resident size stays at its high-water mark.
That is why this is a function you call, never something polykernel does on import.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

__all__ = ["tune_allocator"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc rejects an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit).
_MAX_MMAP_THRESHOLD = 32 * 1024 * 1024


def tune_allocator(
    *,
    mmap_threshold: int = _MAX_MMAP_THRESHOLD,
    trim_threshold: int = 1 << 30,
) -> bool:
    """Keep freed large buffers in glibc's heap so reused outputs do not page-fault.

    Call it once, early (before large arrays exist). Equivalent to starting Python
    with ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` set.

    Args:
        mmap_threshold: Allocations at least this large (bytes) still use ``mmap``;
            at most 32 MiB (glibc's limit).
        trim_threshold: Free memory at the top of the heap beyond this many bytes is
            returned to the operating system.

    Returns:
        True if the settings were applied; False where the C library is not glibc
        (macOS, Windows, musl), in which case nothing changes.

    Raises:
        ValueError: a threshold is not a positive integer, or ``mmap_threshold`` is
            above glibc's 32 MiB limit.

    Example:
        >>> import polykernel as pk
        >>> pk.tune_allocator() in (True, False)
        True
    """
    for name, value in (
        ("mmap_threshold", mmap_threshold),
        ("trim_threshold", trim_threshold),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(
                f"tune_allocator(): {name} must be a positive number of bytes "
                f"(got {value!r})."
            )
    if mmap_threshold > _MAX_MMAP_THRESHOLD:
        raise ValueError(
            f"tune_allocator(): mmap_threshold must be at most {_MAX_MMAP_THRESHOLD} "
            f"bytes (glibc's limit; got {mmap_threshold})."
        )
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return False
    ok_mmap = mallopt(_M_MMAP_THRESHOLD, mmap_threshold)
    ok_trim = mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    return bool(ok_mmap and ok_trim)


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not hasattr(libc, "gnu_get_libc_version"):
            return None  # musl and friends: mallopt does not mean the same thing
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt
