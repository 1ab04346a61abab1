"""Jitted helpers the generated Numba FFI handlers call to walk batch dimensions.

Under ``jax.vmap`` a handler built for rank ``r`` receives buffers of rank
``r + k``: the leading ``k`` dims are batch dims (``expand_dims`` gives unbatched
operands size-1 batch dims, ``broadcast_all`` full ones). Outputs always carry the
full batch. Batch dims of an input align with the *trailing* batch dims of the
outputs (NumPy broadcasting) and a size-1 dim broadcasts.

All helpers read dims straight from the call frame (``dims`` is an ``int64*`` as an
integer address), so nothing is allocated on the call path.
"""

from __future__ import annotations

from numba import njit

from ..ffi.intrinsics import ld64

__all__ = ["batch_index", "batch_ok", "prod_dims"]


@njit(cache=False, nogil=True)
def prod_dims(dims: int, n: int) -> int:
    """Product of the ``n`` int64 dims starting at address ``dims``."""
    total = 1
    for j in range(n):
        total *= ld64(dims + 8 * j)
    return total


@njit(cache=False, nogil=True)
def batch_ok(in_dims: int, k: int, out_dims: int, nbatch: int) -> bool:
    """True if an input's ``k`` batch dims broadcast against the outputs' ones."""
    if k > nbatch:
        return False
    shift = nbatch - k
    for j in range(k):
        d = ld64(in_dims + 8 * j)
        if d != 1 and d != ld64(out_dims + 8 * (j + shift)):
            return False
    return True


@njit(cache=False, nogil=True, error_model="numpy")
def batch_index(b: int, out_dims: int, nbatch: int, in_dims: int, k: int) -> int:
    """Flat batch index into an input for flat output batch index ``b``."""
    lin = 0
    mult = 1
    rem = b
    shift = nbatch - k
    for j in range(nbatch - 1, -1, -1):
        od = ld64(out_dims + 8 * j)
        idx = rem % od
        rem //= od
        if j >= shift:
            d = ld64(in_dims + 8 * (j - shift))
            if d != 1:
                lin += idx * mult
            mult *= d
    return lin
