"""Let numba-cuda compile with NumPy >= 2.5, where ``np.row_stack`` no longer exists.

numba-cuda 0.30.x registers a device overload for ``np.row_stack`` whenever NumPy
is 2.x (``numba.cuda.np.arrayobj``, imported the first time a kernel compiles), so
with NumPy 2.5 the first compilation fails with ``AttributeError: module 'numpy'
has no attribute 'row_stack'``. The shim is as narrow as the fault: if NumPy lacks
the name and that module is not imported yet, it puts a private placeholder on
``numpy`` for the duration of that one import and removes it afterwards, so the
overload attaches to a function no kernel can reach and NumPy's namespace is left
exactly as it was. With NumPy < 2.5, or once numba-cuda stops touching the name,
it does nothing.

Example:
    >>> from polykernel.backends.numba_cuda.numpy_shim import apply_numpy_shim
    >>> _ = apply_numpy_shim()  # True if the placeholder was needed (NumPy >= 2.5)
    >>> apply_numpy_shim()  # numba-cuda's array module is imported now: nothing to do
    False
"""

from __future__ import annotations

import importlib
import sys
import threading

import numpy as np

__all__ = ["apply_numpy_shim"]

_MODULE = "numba.cuda.np.arrayobj"
_lock = threading.Lock()


def _removed_row_stack(*args: object, **kwargs: object) -> None:
    """Placeholder for ``np.row_stack`` (removed in NumPy 2.5); never called."""
    raise AttributeError("numpy.row_stack was removed in NumPy 2.5; use np.vstack")


def apply_numpy_shim() -> bool:
    """Import numba-cuda's array module safely; True if the placeholder was needed."""
    with _lock:
        if _MODULE in sys.modules or "row_stack" in np.__dict__:
            return False
        # NumPy 2.5 removed the name (typed as absent); it exists only meanwhile
        np.row_stack = _removed_row_stack  # pyright: ignore[reportAttributeAccessIssue]
        try:
            importlib.import_module(_MODULE)
        finally:
            delattr(np, "row_stack")
        return True
