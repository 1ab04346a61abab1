"""Which backend and launch parameters a function's primitive calls would use, and
why — found by tracing, without running or compiling anything.

:func:`explain_dispatch` traces ``fun`` with ``jax.make_jaxpr`` (so ``vmap``,
``grad`` and friends inside it are seen as they are lowered: under the default
``vmap`` rule each step's shape) and, for every bind of an ``XLACustomKernel``
primitive it finds (inside ``jit``, ``scan``, ``cond`` and other nested programs
too), asks that primitive's dispatch (:meth:`XLACustomKernel.dispatch`) what the
lowering for ``platform`` would pick.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..dispatch import Dispatch
from . import registry

__all__ = ["Decisions", "explain_dispatch"]

#: The widest line ``print(explain_dispatch(...))`` prints.
WIDTH = 100


class Decisions(list[Dispatch]):
    """What :func:`explain_dispatch` returns: a list of decisions that prints one
    line per decision (``str(decision)``, wrapped within 100 columns) and says
    where the long form is (``decision.details()``)."""

    def __str__(self) -> str:
        import textwrap

        if not self:
            return "no polykernel primitive call"
        wrap = textwrap.TextWrapper(
            WIDTH, subsequent_indent="    ", break_long_words=False
        )
        lines = [out for d in self for out in wrap.wrap(str(d))]
        return "\n".join([*lines, "(each decision's .details(): why, in full)"])


def _equations(jaxpr: Any) -> Iterator[Any]:
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                nested = getattr(inner, "jaxpr", None)
                if nested is not None and hasattr(nested, "eqns"):
                    yield from _equations(nested)
                elif hasattr(inner, "eqns"):
                    yield from _equations(inner)


def explain_dispatch(
    fun: Callable[..., Any], *args: Any, platform: str | None = None, **kwargs: Any
) -> Decisions:
    """The dispatch of every polykernel primitive call ``fun(*args, **kwargs)`` makes.

    Args:
        fun: any JAX-traceable function.
        *args: its arguments (arrays or ``jax.ShapeDtypeStruct``).
        platform: the platform to decide for (default: JAX's default backend).
        **kwargs: keyword arguments of ``fun`` (static for the trace).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel import XLACustomKernel, explain_dispatch
        >>> op = XLACustomKernel("docs.explain_double")
        >>> op.def_jax_raw_kernel(lambda **kw: lambda x: 2 * x, platform="cpu")
        >>> def double(x):
        ...     return op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))
        >>> [(d.backend, d.reason) for d in explain_dispatch(double, jnp.ones(4))]
        [('jax_raw', 'default')]

        ``'default'``: nothing is tuned for this primitive yet (``op.tune()``).
        Printed, the list is one line per decision; each decision's
        ``.details()`` says why in full:

        >>> print(explain_dispatch(double, jnp.ones(4)))
        docs.explain_double on cpu: jax_raw() [default]
        (each decision's .details(): why, in full)
    """
    import functools

    import jax

    closed = jax.make_jaxpr(functools.partial(fun, **kwargs))(*args)
    decisions: Decisions = Decisions()
    for eqn in _equations(closed.jaxpr):
        if "outs" not in eqn.params:
            continue
        try:
            op = registry.get_primitive(eqn.primitive.name)
        except (KeyError, LookupError, TypeError):
            continue
        if getattr(op, "primitive", None) is not eqn.primitive:
            continue
        params = dict(eqn.params)
        outs, backend = params.pop("outs"), params.pop("backend", None)
        avals = [v.aval for v in eqn.invars]
        decisions.append(
            op.dispatch(*avals, outs=outs, platform=platform, backend=backend, **params)
        )
    return decisions
