"""What a primitive is bound with when its call function runs on some data.

Tuning times the primitive itself, not its call function: a call function (say
``csrmv(data, indices, indptr, v, shape=...)``) casts its arguments and builds
``outs``, and has no keyword for a backend's launch parameters. :func:`bound_calls`
runs the call function once, equation by equation (``jax.make_jaxpr`` and the
public ``jax.extend.core`` types), and returns the concrete operands and parameters
of each bind of the primitive, which the tuner then binds again per candidate.

No candidate runs here, outside the deadline the tuner gives each one: the
primitive's own binds are evaluated by ``evaluate`` (the tuner passes one that
binds the ``jax_raw`` reference, when registered), and when there is none, or it
fails, their outputs are zeros of the right shapes (a later bind fed by them is
then timed on zeros: :attr:`BoundCall.after_zeros`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

__all__ = ["BoundCall", "bound_calls"]

_FOLLOWED = ("pjit", "jit", "closed_call", "core_call")


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """One bind: its operands (concrete arrays), its parameters (``outs``,
    ``backend`` and the static keywords), and whether an earlier bind's outputs
    were replaced by zeros (so these operands may hold some)."""

    operands: tuple[Any, ...]
    params: dict[str, Any]
    after_zeros: bool = False

    @property
    def statics(self) -> dict[str, Any]:
        """The static keywords (every parameter but ``outs`` and ``backend``)."""
        return {k: v for k, v in self.params.items() if k not in ("outs", "backend")}


#: ``evaluate(operands, params) -> outputs``: one bind of the primitive, for capture.
Evaluate = Callable[[Sequence[Any], dict[str, Any]], Sequence[Any]]


def _outputs(
    eqn: Any, ins: Sequence[Any], evaluate: Evaluate | None
) -> tuple[list[Any], bool]:
    """The outputs of one of the primitive's own binds, and whether they are
    zeros (no ``evaluate``, or it failed)."""
    if evaluate is not None:
        try:
            outs = list(evaluate(ins, dict(eqn.params)))
            if len(outs) == len(eqn.outvars):
                return outs, False
        except Exception:  # a failing reference: the candidates' turn will say
            pass
    return [np.zeros(v.aval.shape, v.aval.dtype) for v in eqn.outvars], True


def bound_calls(
    fun: Callable[..., Any],
    args: Sequence[Any],
    primitive: Any,
    evaluate: Evaluate | None = None,
) -> list[BoundCall]:
    """Run ``fun(*args)`` eagerly and return every bind of ``primitive`` it makes.

    Calls inside ``jit`` are followed; ``primitive``'s own binds are evaluated by
    ``evaluate`` (without one, or when it fails: zeros), never by the kernel
    dispatch would pick.
    """
    from jax.extend import core

    closed = jax.make_jaxpr(fun)(*args)
    found: list[BoundCall] = []
    zeroed = False

    def run(jaxpr: Any, consts: Sequence[Any], values: Sequence[Any]) -> list[Any]:
        nonlocal zeroed
        env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, values, strict=True))

        def read(v: Any) -> Any:
            return v.val if isinstance(v, core.Literal) else env[v]

        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            inner = eqn.params.get("jaxpr")
            if eqn.primitive is primitive:
                found.append(BoundCall(tuple(ins), dict(eqn.params), zeroed))
                outs, zeros = _outputs(eqn, ins, evaluate)
                zeroed = zeroed or zeros
            elif eqn.primitive.name in _FOLLOWED and hasattr(inner, "consts"):
                outs = run(inner.jaxpr, inner.consts, ins)
            else:
                result = eqn.primitive.bind(*ins, **eqn.params)
                outs = list(result) if eqn.primitive.multiple_results else [result]
            env.update(zip(eqn.outvars, outs, strict=True))
        return [read(v) for v in jaxpr.outvars]

    run(closed.jaxpr, closed.consts, list(jax.tree.leaves(args)))
    return found
