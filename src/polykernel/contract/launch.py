"""Launch parameters (``grid``, ``block``, ``launch_dims``, counts): one set of rules.

Every backend that takes a launch configuration checks it here, when the kernel is
wrapped, so the same mistake gets the same error everywhere: a
:class:`~polykernel.errors.KernelRegistrationError` (a ``ValueError``, as the
reference documents for ``numba_cuda_kernel``'s configuration) naming the parameter,
the rule and the value. The rules:

- a dimension is an ``int`` or a NumPy integer; ``bool``, ``float`` (even ``4.0``),
  strings and ``None`` are refused: ``launch_dims="16"`` must not launch ``(1, 6)``
  and ``launch_dims=True`` must not launch one thread;
- a shape of dimensions is one such int, or a list/tuple of them, with as many
  entries as the backend's launch has axes; every entry within ``[minimum,
  maximum]`` (no negative grid, no block of 0 threads);
- a count (``threads_per_block``, ``shared_mem``, ``num_stages``) is one int within
  its range; ``num_warps`` a power of two.

Example:
    >>> from polykernel.contract.launch import launch_shape
    >>> launch_shape("k", "grid", 4, max_rank=3)
    (4,)
    >>> launch_shape("k", "block", (16, 16), max_rank=3, minimum=1)
    (16, 16)
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from ..errors import KernelRegistrationError

__all__ = [
    "MAX_DIM",
    "launch_count",
    "launch_shape",
    "power_of_two",
    "size_of",
    "three_axes",
]

#: Largest launch dimension accepted anywhere (CUDA grids and Warp's launch bounds
#: are 32-bit).
MAX_DIM = 2**31 - 1


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _range_text(minimum: int, maximum: int) -> str:
    return f"in [{minimum}, {maximum}]"


def launch_shape(
    where: str,
    name: str,
    value: Any,
    *,
    max_rank: int,
    min_rank: int = 1,
    minimum: int = 0,
    maximum: int = MAX_DIM,
    alternative: str = "",
) -> tuple[int, ...]:
    """``value`` (an int or a list/tuple of ints) as a tuple of launch dimensions.

    ``alternative`` names another accepted form for the message (Triton's
    ``"a callable meta -> such a tuple"``).

    Raises:
        KernelRegistrationError: not ints, a wrong number of entries, or an entry
            outside ``[minimum, maximum]``.
    """
    items = tuple(value) if isinstance(value, list | tuple) else (value,)
    ranks = (
        f"{min_rank} to {max_rank}" if min_rank != max_rank else f"exactly {max_rank}"
    )
    if not all(_is_int(v) for v in items) or not min_rank <= len(items) <= max_rank:
        single = "an int or " if min_rank <= 1 else ""
        other = f", or {alternative}" if alternative else ""
        raise KernelRegistrationError(
            f"{where}: {name} must be {single}a tuple of {ranks} ints{other}, got "
            f"{value!r} ({type(value).__name__}). Strings, floats and bools are not "
            f"launch dimensions."
        )
    dims = tuple(int(v) for v in items)
    if any(not minimum <= d <= maximum for d in dims):
        raise KernelRegistrationError(
            f"{where}: every entry of {name} must be {_range_text(minimum, maximum)}, "
            f"got {value!r}."
        )
    return dims


def launch_count(
    where: str, name: str, value: Any, *, minimum: int = 0, maximum: int = MAX_DIM
) -> int:
    """``value`` as one int within ``[minimum, maximum]``.

    Raises:
        KernelRegistrationError: not an int (bool, float and str included) or out of
            range.
    """
    if not _is_int(value) or not minimum <= int(value) <= maximum:
        raise KernelRegistrationError(
            f"{where}: {name} must be an int {_range_text(minimum, maximum)}, got "
            f"{value!r} ({type(value).__name__})."
        )
    return int(value)


def power_of_two(where: str, name: str, value: Any, *, maximum: int = 64) -> int:
    """``value`` as a power of two in ``[1, maximum]`` (``num_warps``).

    Raises:
        KernelRegistrationError: not an int or not a power of two in range.
    """
    if not _is_int(value) or not 1 <= int(value) <= maximum or int(value) & (
        int(value) - 1
    ):
        raise KernelRegistrationError(
            f"{where}: {name} must be a power of two (1, 2, 4, ... {maximum}), got "
            f"{value!r}."
        )
    return int(value)


def size_of(dims: tuple[int, ...]) -> int:
    """How many threads (or programs) a launch of ``dims`` runs (0: none)."""
    total = 1
    for d in dims:
        total *= d
    return total


def three_axes(dims: Sequence[int]) -> tuple[int, int, int]:
    """``dims`` (one to three axes, as :func:`launch_shape` gives) padded with 1s.

    Example:
        >>> from polykernel.contract.launch import three_axes
        >>> three_axes((8, 2))
        (8, 2, 1)
    """
    x, y, z = (*dims, 1, 1, 1)[:3]
    return x, y, z
