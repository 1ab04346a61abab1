"""A Triton kernel's Python source: ``@triton.jit`` or, under ``TRITON_INTERPRET=1``,
the interpreter's function.

Triton's documentation runs kernels on a CPU by setting ``TRITON_INTERPRET=1``
before they are decorated; ``@triton.jit`` then returns an ``InterpretedFunction``
instead of a ``JITFunction``. Both carry the kernel's Python function (``.fn``) and
parameter names, which is all polykernel's CPU path (:mod:`.cpu`) needs, so both
are accepted and behave the same on the CPU. For a GPU, a ``JITFunction`` is made
from the Python function when the kernel is compiled; a kernel that calls other
``@triton.jit`` helpers cannot be compiled that way in such a process (the helpers
are interpreter-only too), and the error says to unset ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Any

from ...errors import BackendUnavailableError, KernelTypeError

__all__ = ["INTERPRET_ENV", "TritonSource", "import_triton", "kernel_source"]

#: The variable with which Triton's interpreter replaces ``@triton.jit``.
INTERPRET_ENV = "TRITON_INTERPRET"


def import_triton() -> Any:
    """Import Triton, or raise an ImportError naming the extra to install."""
    try:
        import triton
    except ImportError as err:
        raise BackendUnavailableError(
            "triton_kernel: Triton is not installed; install it with "
            "pip install 'polykernel[triton]'."
        ) from err
    return triton


def interpret_mode() -> bool:
    """Whether this process decorates kernels for Triton's interpreter."""
    return os.environ.get(INTERPRET_ENV, "0") not in ("", "0")


@dataclass
class TritonSource:
    """What polykernel needs of a decorated kernel.

    Attributes:
        kernel: the object the user passed (``JITFunction`` or
            ``InterpretedFunction``).
        fn: its Python function.
        name: the kernel's name.
        arg_names: its parameter names, in order.
        constexpr_names: those annotated ``tl.constexpr``.
        interpreted: decorated under ``TRITON_INTERPRET=1``.
    """

    kernel: Any
    fn: Any
    name: str
    arg_names: list[str]
    constexpr_names: set[str]
    interpreted: bool
    _jit: Any = field(default=None, repr=False)

    def jit(self) -> Any:
        """A ``JITFunction`` of the kernel, for Triton's compiler."""
        if self._jit is None:
            if not self.interpreted:
                self._jit = self.kernel
            else:
                from triton.runtime.jit import JITFunction

                self._jit = JITFunction(self.fn)
        return self._jit


def _constexprs(fn: Any) -> set[str]:
    # Triton's own rule (KernelParam.is_constexpr): the annotation names constexpr.
    found = set()
    for param in inspect.signature(fn).parameters.values():
        annotation = param.annotation
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if annotation is not inspect.Parameter.empty and "constexpr" in text:
            found.add(param.name)
    return found


def kernel_source(fn: Any) -> TritonSource:
    """The :class:`TritonSource` of a ``@triton.jit`` kernel.

    Raises:
        BackendUnavailableError: Triton is not installed.
        KernelTypeError: ``fn`` is not a ``@triton.jit`` kernel.
    """
    import_triton()
    from triton.runtime.jit import JITFunction

    name = getattr(fn, "__name__", type(fn).__name__)
    if isinstance(fn, JITFunction):
        constexprs = {p.name for p in fn.params if p.is_constexpr}
        return TritonSource(fn, fn.fn, name, list(fn.arg_names), constexprs, False)
    # Only now: the interpreter imports in ~150 ms, which a GPU lowering never needs.
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(fn, InterpretedFunction):
        return TritonSource(
            fn, fn.fn, name, list(fn.arg_names), _constexprs(fn.fn), True
        )
    raise KernelTypeError(
        f"triton_kernel: expected a @triton.jit function, got "
        f"{type(fn).__name__} '{name}'. Decorate the kernel with "
        f"@triton.jit (autotuned kernels: pass the inner @triton.jit "
        f"function and fixed meta-parameters)."
    )
