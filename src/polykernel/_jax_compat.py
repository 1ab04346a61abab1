"""The only module that touches JAX internals or version-dependent JAX APIs.

Everything else in polykernel imports JAX rule tables, abstract values and lowering
helpers from here, so a JAX release that moves a symbol is fixed in one place.
Tested against the newest JAX for Python 3.11 (0.10.x) and for Python 3.12 (0.12.x).
"""

from __future__ import annotations

import threading
from typing import Any

import jax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

__all__ = [
    "Primitive",
    "ShapedArray",
    "UndefinedPrimal",
    "Zero",
    "apply_primitive",
    "aval_of",
    "bump_dispatch_epoch",
    "instantiate_zeros",
    "is_undefined_primal",
    "lower_fun",
    "register_lowering",
    "set_batching_rule",
    "set_jvp_rule",
    "set_transpose_rule",
    "zero_tangent",
]

ShapedArray = jax.core.ShapedArray
Zero = ad.Zero
UndefinedPrimal = ad.UndefinedPrimal
is_undefined_primal = ad.is_undefined_primal
instantiate_zeros = ad.instantiate_zeros
lower_fun = mlir.lower_fun
register_lowering = mlir.register_lowering


def aval_of(x: Any) -> Any:
    """The abstract value (shape, dtype, weak type) of an array or tracer."""
    return jax.typeof(x)


def apply_primitive(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Run a primitive eagerly through XLA (compiled once per params, then cached)."""
    from jax._src import dispatch

    return dispatch.apply_primitive(prim, *args, **params)


def set_batching_rule(prim: Primitive, rule: Any) -> None:
    batching.primitive_batchers[prim] = rule


def set_jvp_rule(prim: Primitive, rule: Any) -> None:
    ad.primitive_jvps[prim] = rule


def set_transpose_rule(prim: Primitive, rule: Any) -> None:
    ad.primitive_transposes[prim] = rule


def zero_tangent(primal_aval: Any) -> Any:
    """A symbolic zero tangent for an output whose primal has ``primal_aval``."""
    return Zero(primal_aval.to_tangent_aval())


# NOTE [dispatch epoch]: which backend a primitive lowers to is decided at lowering
# time from the primitive's defaults. JAX caches traces and executables, so a changed
# default would be ignored by functions jitted earlier. Instead of jax.clear_caches()
# (process-wide, drops every compiled executable, not thread-safe) we keep an integer
# JAX config state that is part of the jit cache key: bumping it makes every jitted
# function re-trace on its next call, and unchanged programs hit the compile cache.
_epoch_lock = threading.Lock()
_epoch_state: Any = None


def _epoch() -> Any:
    global _epoch_state
    with _epoch_lock:
        if _epoch_state is None:
            from jax._src import config as jax_config

            _epoch_state = jax_config.int_state(
                "polykernel_dispatch_epoch",
                0,
                "Incremented by polykernel whenever a backend default changes.",
                include_in_jit_key=True,
                include_in_trace_context=True,
            )
        return _epoch_state


def bump_dispatch_epoch() -> None:
    """Invalidate cached traces so the next call of every jitted function re-lowers."""
    state = _epoch()
    with _epoch_lock:
        state.set_global(state.get_global() + 1)


def ensure_dispatch_epoch() -> None:
    """Register the epoch config state (idempotent); called when a primitive is made."""
    _epoch()
