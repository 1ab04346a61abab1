"""A kernel's keyword parameters: declared by its backend, checked by the core.

Every kernel wrapper takes its non-array arguments as keywords of the call. What
they are is the technology's business — a Warp annotation, a native spec, a Numba
or Triton function's parameter list, a Pallas body's keywords — so a backend
*declares* them as :class:`Parameters` when its kernel is made; what the core does
with a call's keywords is the same on every backend (:func:`bind_keywords`):

- a keyword that names no parameter is a :class:`~polykernel.errors.KernelCallError`
  (a ``TypeError``, as Python raises for a function) listing the parameters (for
  a kernel of an out-of-tree backend, naming the backend, which must declare the
  parameters its kernels take);
- a parameter without a default that the call does not give is the same class,
  naming it;
- each value then goes through the one converter (:mod:`.scalars`): a scalar of a
  declared dtype, or of the dtype the backend's rule infers from the value
  (:data:`INFERRED`), or a :data:`STATIC` value — any hashable Python value bound
  as it is (Pallas keywords, Triton constexprs).

A kernel whose arrays fill the leading parameters of a function (Numba, Numba-CUDA,
Triton, Pallas: ``def k(x, out, alpha)``) declares ``leading="buffers"`` (inputs
then outputs) or ``leading="inputs"`` (a pure-JAX function returns its outputs):
its keyword parameters are those left after the call's arrays.

What a backend declares is checked when its kernel is made (:func:`checked`): a
dtype NumPy does not know, or ``None``, is refused there, naming the kernel and the
allowed values, instead of at the first call.

Example:
    >>> from polykernel.contract.parameters import Parameters, INFERRED
    >>> p = Parameters.declared({"alpha": "float32", "n": INFERRED})
    >>> p.describe(1, 1)
    'parameters: alpha: float32, n: inferred'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from ..errors import KernelCallError, KernelRegistrationError, KernelTypeError

__all__ = [
    "INFERRED",
    "STATIC",
    "Leading",
    "Parameter",
    "Parameters",
    "bind_keywords",
    "checked",
]


class _Marker:
    """A named marker in the dtype slot of a :class:`Parameter`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name.upper()


#: The dtype comes from the value, by the backend's rule
#: (:meth:`~polykernel.contract.kernel.BackendKernel.infer_dtype`).
INFERRED: Any = _Marker("inferred")
#: A compile-time value: any hashable, untraced Python value, passed as it is.
STATIC: Any = _Marker("static")

#: Which arrays fill a function's leading parameters.
Leading = Literal["none", "inputs", "buffers"]


@dataclass(frozen=True)
class Parameter:
    """One keyword parameter of a kernel.

    Attributes:
        name: its name.
        dtype: a NumPy dtype name, :data:`INFERRED` or :data:`STATIC`.
        optional: it has a default, so a call may leave it out.
        positional: it can take an array when arrays lead (not keyword-only).
    """

    name: str
    dtype: Any = INFERRED
    optional: bool = False
    positional: bool = True

    def describe(self) -> str:
        """``"alpha: float32"``, ``"n: inferred"``, ``"BLOCK: static (optional)"``."""
        kind = self.dtype.name if isinstance(self.dtype, _Marker) else str(self.dtype)
        return f"{self.name}: {kind}{' (optional)' if self.optional else ''}"


@dataclass(frozen=True)
class Parameters:
    """A kernel's parameters, as its backend declares them.

    Attributes:
        entries: every parameter in order (leading array parameters included).
        leading: which arrays fill the first positional parameters of a call:
            ``"none"`` (the entries are the keyword parameters), ``"inputs"`` or
            ``"buffers"`` (inputs, then outputs).
        star: a ``*args`` parameter takes the arrays beyond the positional ones.
        open: a ``**kwargs`` parameter: any other keyword is a static value.
    """

    entries: tuple[Parameter, ...] = ()
    leading: Leading = "none"
    star: bool = False
    open: bool = False

    @classmethod
    def declared(
        cls, dtypes: Mapping[str, Any], *, optional: Collection[str] = ()
    ) -> Parameters:
        """Keyword parameters by name, each with its dtype (or a marker)."""
        return cls(tuple(Parameter(n, d, n in optional) for n, d in dtypes.items()))

    @classmethod
    def of_function(
        cls,
        fn: Callable[..., Any],
        *,
        leading: Leading,
        dtype: Any = INFERRED,
        dtypes: Mapping[str, Any] | None = None,
        accept_var_keyword: bool = False,
    ) -> Parameters:
        """The parameters of Python function ``fn`` (its defaults make them
        optional); ``dtypes`` overrides ``dtype`` by name. ``**kwargs`` is honoured
        (any other keyword is static) only with ``accept_var_keyword``. A callable
        whose signature cannot be read takes any keyword (``open``)."""
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):
            return cls(leading=leading, star=True, open=True)
        entries, star, var_kw = [], False, False
        for p in signature.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                star = True
            elif p.kind is p.VAR_KEYWORD:
                var_kw = True
            else:
                kind = (dtypes or {}).get(p.name, dtype)
                optional = p.default is not p.empty
                positional = p.kind is not p.KEYWORD_ONLY
                entries.append(Parameter(p.name, kind, optional, positional))
        open_ = var_kw and accept_var_keyword
        return cls(tuple(entries), leading, star, open_)

    def _arrays(self, n_inputs: int, n_outputs: int) -> tuple[int, list[str]]:
        """How many arrays a call fills parameters with, and which they fill."""
        n = {"none": 0, "inputs": n_inputs, "buffers": n_inputs + n_outputs}
        positional = [p.name for p in self.entries if p.positional]
        return n[self.leading], positional[: n[self.leading]]

    def for_call(self, n_inputs: int, n_outputs: int) -> tuple[Parameter, ...]:
        """The keyword parameters of a call with these arrays (the leading
        positional parameters take the arrays)."""
        taken = set(self._arrays(n_inputs, n_outputs)[1])
        return tuple(p for p in self.entries if p.name not in taken)

    def describe(self, n_inputs: int, n_outputs: int) -> str:
        """What messages list: ``"parameters: alpha: float32, n: inferred"``,
        after the parameters the call's arrays take (``"x, out take the call's 2
        arrays; parameters: ..."``)."""
        listed = ", ".join(p.describe() for p in self.for_call(n_inputs, n_outputs))
        extra = ", any other keyword: static" if self.open else ""
        n, taken = self._arrays(n_inputs, n_outputs)
        head = ""
        if n:
            verb = "takes" if len(taken) <= 1 else "take"
            head = f"{', '.join(taken) or '*args'} {verb} the call's {n} array"
            head += f"{'s' if n > 1 else ''}; "
        return f"{head}parameters: {listed or 'none'}{extra}"


#: The dtype kinds a declared parameter may have: bool, signed and unsigned
#: integers, real floats (what :func:`~.scalars.convert_attribute` converts to).
_SCALAR_KINDS = "biuf"
_ALLOWED = (
    "a NumPy scalar dtype name ('bool', 'int8' to 'int64', 'uint8' to 'uint64', "
    "'float16', 'float32', 'float64'), INFERRED (the value's type decides, by the "
    "backend's rule) or STATIC (any hashable value, passed as it is), both from "
    "polykernel.contract.parameters"
)


def checked(where: str, parameters: Any) -> Parameters:
    """A kernel's declared ``parameters`` (:class:`Parameters`, a mapping ``name ->
    dtype``, or None for none) as :class:`Parameters`, every entry checked.

    Raises:
        KernelTypeError: ``parameters`` of another type, a name that is not a
            string, a dtype that is not a dtype (``None``, a number).
        KernelRegistrationError: a name that is not an identifier, a dtype name
            NumPy does not know (``"float99"``), a dtype no scalar has
            (``"complex64"``, ``"str"``).
    """
    if parameters is None:
        return Parameters()
    if isinstance(parameters, Mapping):
        for name in parameters:
            _check_name(where, name)
        parameters = Parameters.declared(parameters)
    elif not isinstance(parameters, Parameters):
        raise KernelTypeError(
            f"{where}: parameters must be a mapping from each keyword parameter's "
            f"name to its dtype, a polykernel.contract.parameters.Parameters, or "
            f"None (no keywords); got {type(parameters).__name__} "
            f"{parameters!r:.80}. Write e.g. parameters={{'alpha': 'float32'}}."
        )
    for entry in parameters.entries:
        _check_dtype(where, entry.name, entry.dtype)
    return parameters


def _check_name(where: str, name: Any) -> None:
    if not isinstance(name, str):
        raise KernelTypeError(
            f"{where}: parameters: each name must be a string (the keyword a call "
            f"passes), got {type(name).__name__} {name!r:.60}."
        )
    if not name.isidentifier():
        raise KernelRegistrationError(
            f"{where}: parameters: {name!r} cannot be a keyword argument; name "
            f"each parameter with a Python identifier, e.g. 'alpha'."
        )


def _check_dtype(where: str, name: str, dtype: Any) -> None:
    if dtype is INFERRED or dtype is STATIC:
        return
    head = f"{where}: parameters: {name!r} is declared with dtype {dtype!r:.60}"
    fix = f"declare {_ALLOWED}; e.g. parameters={{{name!r}: 'float32'}}."
    try:
        # np.dtype(None) is float64: None would pass unnoticed, then mislead calls.
        resolved = None if dtype is None else np.dtype(dtype)
    except (TypeError, ValueError):
        resolved = None
    if resolved is None and not isinstance(dtype, str):
        raise KernelTypeError(
            f"{head} ({type(dtype).__name__}), which is not a dtype; {fix}"
        )
    if resolved is None:
        raise KernelRegistrationError(f"{head}, which NumPy does not know; {fix}")
    if resolved.kind not in _SCALAR_KINDS:
        raise KernelRegistrationError(
            f"{head}: {resolved.name} is not a dtype a scalar parameter can have "
            f"(bool, integers, real floats); {fix}"
        )


def _names(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)


def bind_keywords(
    where: str,
    parameters: Parameters,
    keywords: Collection[str],
    n_inputs: int,
    n_outputs: int,
    plugin: str | None = None,
) -> dict[str, Parameter]:
    """Each keyword of a call with its :class:`Parameter`.

    ``plugin`` names the out-of-tree backend whose kernel this is (``"out-of-tree
    backend 'ctypes_c' (ctypes_backend.CtypesKernel)"``); None for a built-in one. An
    unknown keyword on a plugin's kernel may be a parameter its backend forgot to
    declare: the message says so, for whoever reports it to the plugin's authors.

    Raises:
        KernelCallError: a keyword that names no parameter, or a parameter without
            a default that the call does not give.
    """
    params = parameters.for_call(n_inputs, n_outputs)
    listing = parameters.describe(n_inputs, n_outputs)
    by_name = {p.name: p for p in params}
    unknown = sorted(k for k in keywords if k not in by_name)
    if unknown and not parameters.open:
        s = "s" if len(unknown) > 1 else ""
        fix = "pass only the kernel's parameters as keywords (check the spelling)."
        if plugin is not None:
            example = ", ".join(f"{k!r}: 'float32'" for k in unknown)
            it = "them" if s else "it"
            fix = (
                f"check the spelling. If the kernel does take {_names(unknown)}, the "
                f"{plugin} must declare {it}: pass parameters={{{example}}} (a dtype "
                f"name, INFERRED or STATIC) to BackendKernel.__init__ in the plugin "
                f"(or report it to the plugin's authors)."
            )
        raise KernelCallError(
            f"{where}: unknown keyword argument{s} {_names(unknown)} ({listing}); {fix}"
        )
    missing = [p.name for p in params if not p.optional and p.name not in keywords]
    if missing:
        plural = len(missing) > 1
        s, them = ("s", "them as keywords") if plural else ("", "it as a keyword")
        raise KernelCallError(
            f"{where}: missing keyword argument{s} {_names(missing)} "
            f"({listing}); pass {them}."
        )
    static = Parameter("", STATIC, optional=True)
    return {k: by_name.get(k) or replace(static, name=k) for k in keywords}
