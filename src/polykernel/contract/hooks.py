"""What a kernel's backend hooks return, checked where :class:`~.kernel.BackendKernel`
calls them.

A backend's ``emit`` and ``translate_error`` are code polykernel did not write (a
plugin's, for one). What they return is checked here, once for every backend, so a
wrong result is our :class:`~polykernel.errors.BackendHookError` naming the kernel,
the backend, the hook, what was expected and what came back — instead of a value
silently truncated or of the wrong shape, or a raw ``TypeError``/``IndexError`` from
inside polykernel that hides the kernel's own error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import BackendHookError
from .outs import OutSpec

__all__ = ["checked_emitted", "translated_error"]


def _hook(kernel: Any, hook: str) -> str:
    """``"<kind> '<name>': backend '<b>' hook <Class>.<hook>"``, a message's head."""
    return (
        f"{kernel.where}: backend '{kernel.backend}' hook "
        f"{type(kernel).__qualname__}.{hook}"
    )


def _struct(shape: Any, dtype: Any) -> str:
    return f"{np.dtype(dtype).name}{list(shape)}"


def _value(value: Any) -> str:
    """What came back, as a message shows it (``float32[2]``, ``NoneType None``)."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:  # np.dtype(None) would be float64
        try:
            return _struct(tuple(shape), dtype)
        except TypeError:
            pass
    return f"{type(value).__name__} {value!r:.60}"


def checked_emitted(
    kernel: Any, platform: str, result: Any, outs: OutSpec
) -> list[Any]:
    """``result`` of ``kernel.emit(platform, ...)`` as a list: one array per output
    of ``outs``, each of its shape and dtype.

    Raises:
        BackendHookError: not a list/tuple, another count, or a value that is not an
            array of the declared shape and dtype.
    """
    head = f"{_hook(kernel, 'emit')}({platform})"
    declared = [_struct(s.shape, s.dtype) for s in outs.structs]
    listed = f"[{', '.join(declared)}]"
    if not isinstance(result, Sequence) or isinstance(result, str | bytes):
        raise BackendHookError(
            f"{head} returned {_value(result)}; it must return a list with one JAX "
            f"array per output of outs={listed} (e.g. [y] for one output)."
        )
    if len(result) != len(declared):
        raise BackendHookError(
            f"{head} returned {len(result)} value(s) for {len(declared)} output(s) "
            f"(outs={listed}); it must return exactly one JAX array per output, in "
            f"the order of outs."
        )
    for j, (value, struct) in enumerate(zip(result, outs.structs, strict=True)):
        if not _matches(value, struct):
            raise BackendHookError(
                f"{head} returned {_value(value)} for output {j}, declared "
                f"outs[{j}]={declared[j]}; it must return an array of the declared "
                f"shape and dtype (or the kernel must declare what it returns)."
            )
    return list(result)


def _matches(value: Any, struct: Any) -> bool:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return False
    try:
        return tuple(shape) == tuple(struct.shape) and np.dtype(dtype) == np.dtype(
            struct.dtype
        )
    except TypeError:  # not a dtype NumPy knows: not what outs declared
        return False


def translated_error(
    kernel: Any, err: Exception, translate: Callable[[Exception], Any]
) -> Exception | None:
    """``translate(err)`` (the backend's ``translate_error``), checked: an exception
    to raise instead of ``err``, or None to raise ``err`` as it is.

    Raises:
        BackendHookError: the hook raised (its exception chained) or returned
            something else; the message keeps the kernel's own error.
    """
    head = _hook(kernel, "translate_error")
    kernel_error = f"the kernel's error was {type(err).__name__}: {err}"
    try:
        translated = translate(err)
    except Exception as hook_err:
        raise BackendHookError(
            f"{head} raised {type(hook_err).__name__}: {hook_err}; {kernel_error}. "
            f"translate_error must return an exception to raise, or None."
        ) from hook_err
    if translated is None or translated is err:
        return None
    if not isinstance(translated, Exception):
        raise BackendHookError(
            f"{head} returned {type(translated).__name__} {translated!r:.60}; it must "
            f"return an Exception instance to raise, or None; {kernel_error}."
        ) from err
    return translated
