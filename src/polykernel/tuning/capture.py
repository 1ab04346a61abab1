"""What a primitive is bound with when its call function runs on some data.

Tuning times the primitive itself, not its call function: a call function (say
``csrmv(data, indices, indptr, v, shape=...)``) casts its arguments and builds
``outs``, and has no keyword for a backend's launch parameters. :func:`bound_calls`
runs the call function once, equation by equation (``jax.make_jaxpr`` and the
public ``jax.extend.core`` types), and returns the concrete operands and parameters
of each bind of the primitive, which the tuner then binds again per candidate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax

__all__ = ["BoundCall", "bound_calls"]

_FOLLOWED = ("pjit", "jit", "closed_call", "core_call")


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """One bind: its operands (concrete arrays) and its parameters (``outs``,
    ``backend`` and the static keywords)."""

    operands: tuple[Any, ...]
    params: dict[str, Any]

    @property
    def statics(self) -> dict[str, Any]:
        """The static keywords (every parameter but ``outs`` and ``backend``)."""
        return {k: v for k, v in self.params.items() if k not in ("outs", "backend")}


def bound_calls(
    fun: Callable[..., Any], args: Sequence[Any], primitive: Any
) -> list[BoundCall]:
    """Run ``fun(*args)`` eagerly and return every bind of ``primitive`` it makes.

    Calls inside ``jit`` are followed; ``primitive``'s own binds run as they are
    (their outputs may feed later equations).
    """
    from jax.extend import core

    closed = jax.make_jaxpr(fun)(*args)
    found: list[BoundCall] = []

    def run(jaxpr: Any, consts: Sequence[Any], values: Sequence[Any]) -> list[Any]:
        env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, values, strict=True))

        def read(v: Any) -> Any:
            return v.val if isinstance(v, core.Literal) else env[v]

        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            if eqn.primitive is primitive:
                found.append(BoundCall(tuple(ins), dict(eqn.params)))
            inner = eqn.params.get("jaxpr")
            if eqn.primitive.name in _FOLLOWED and hasattr(inner, "consts"):
                outs = run(inner.jaxpr, inner.consts, ins)
            else:
                result = eqn.primitive.bind(*ins, **eqn.params)
                outs = list(result) if eqn.primitive.multiple_results else [result]
            env.update(zip(eqn.outvars, outs, strict=True))
        return [read(v) for v in jaxpr.outvars]

    run(closed.jaxpr, closed.consts, list(jax.tree.leaves(args)))
    return found
