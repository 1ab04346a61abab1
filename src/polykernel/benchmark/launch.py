"""Which launch parameters a benchmarked call ran with, and why.

A backend's kernel generator gets launch parameters (``parallel``, ``block``, ...)
that dispatch fills in at lowering (:class:`~polykernel.dispatch.Dispatch`): the
call's own value, else a tuned table's, else the first candidate. A timing means
little without them — ``numba`` serial and ``numba`` with a thread per core are two
different kernels — so each record names them and where they came from, asked of the
same decision the lowering makes, by tracing the call (nothing runs or compiles).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..dispatch.describe import param_sources

__all__ = ["SOURCES", "describe", "launch_of", "source_of"]

#: Where launch parameters come from, in the words tables print.
SOURCES = {
    "tuned": "a tuned table's entry (yours, or the one the library ships)",
    "default": "each parameter's first candidate (nothing tuned for this case)",
    "given": "the call passed them",
}


def source_of(decision: Any) -> str | None:
    """``"tuned"``, ``"default"`` or ``"given"`` for a decision's parameters (two
    joined by ``+`` when they differ per parameter); ``None`` without parameters.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> from polykernel.benchmark.launch import source_of
        >>> source_of(NS(params={"block": 256}, from_call=(), entry=None))
        'default'
    """
    sources = param_sources(decision)
    return "+".join(sorted(set(sources.values()))) if sources else None


def _binds(jaxpr: Any, primitive: Any) -> Iterator[Any]:
    """The equations binding ``primitive``, nested programs (``jit``, ``scan``,
    ``cond``) included — the walk ``core.explain`` makes, which this layer (below
    the core) cannot import."""
    for eqn in jaxpr.eqns:
        if eqn.primitive is primitive:
            yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                nested = getattr(inner, "jaxpr", inner)
                if hasattr(nested, "eqns"):
                    yield from _binds(nested, primitive)


def launch_of(
    kernel: Any, call: Callable[..., Any], args: Sequence[Any], platform: str
) -> tuple[dict[str, Any], str | None]:
    """``(params, source)`` of the first bind of ``kernel``'s primitive that
    ``call(*args)`` makes, as ``kernel.dispatch`` decides it on ``platform``
    (``({}, None)`` when it binds none, or tracing fails: a failing call is
    reported by the benchmark itself)."""
    import jax

    try:
        closed = jax.make_jaxpr(call)(*args)
        eqn = next(_binds(closed.jaxpr, kernel.primitive), None)
        if eqn is None:
            return {}, None
        params = dict(eqn.params)
        outs, backend = params.pop("outs"), params.pop("backend", None)
        ins = [v.aval for v in eqn.invars]
        decision = kernel.dispatch(
            *ins, outs=outs, platform=platform, backend=backend, **params
        )
    except Exception:
        return {}, None
    return dict(decision.params), source_of(decision)


def describe(params: Mapping[str, Any], source: str | None) -> str:
    """``parallel=True (tuned)``; ``""`` without parameters.

    Example:
        >>> from polykernel.benchmark.launch import describe
        >>> describe({"parallel": True, "grain": 4096}, "tuned")
        'grain=4096, parallel=True (tuned)'
    """
    if not params:
        return ""
    text = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    return f"{text} ({source})" if source else text
