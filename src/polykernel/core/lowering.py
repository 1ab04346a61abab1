"""Per-platform lowering: get the decision, run its generator, lower what it returns.

The lowering rule runs once per compilation. It asks the primitive for the decision
of this lowering (the backend and its launch parameters: made by
:func:`polykernel.dispatch.decide`, whose precedence is stated once in
``dispatch/precedence.py``), calls that backend's kernel generator with ``outs``,
the launch parameters, the bound keywords and (if declared) ``ins``, and lowers the
returned JAX-traceable function with ``mlir.lower_fun``. Because the decision is
made per lowering platform, one ``jax.export`` can carry a different backend per
platform. Every input of the decision that can change at run time
(``set_backend``, ``set_default``, ``asdefault`` registration, a tuned table saved)
bumps the dispatch epoch, so functions jitted earlier re-lower on their next call.

A platform without kernels raises ``KernelFallbackExhaustedError`` and an unregistered
``backend=`` raises ``UnknownBackendError`` (both before the generator runs); anything
the generator or its kernel raises becomes ``KernelCompilationError``, whose message
names the other backends to switch to. A primitive with a sharding rule is wrapped
for the partitioner here when the program is partitioned over several devices (see
:mod:`.sharding`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jax.dtypes import canonicalize_dtype

from .. import backends
from .._jax_compat import lower_fun, unchecked_manual_axes, unsharded_inputs
from ..contract.platform_context import lowering_for
from ..errors import KernelCompilationError
from ..sharding.rules import partitioned, plan_for
from .kernel_table import KernelEntry, KernelTable

__all__ = ["call_generator", "make_lowering_rule"]

#: ``decide(platform, avals, outs, params, backend) -> (entry, decision)``.
Decide = Callable[..., tuple[KernelEntry, Any]]


@functools.lru_cache(maxsize=512)
def _accepts_ins(generator: Callable[..., Any]) -> bool:
    try:
        return "ins" in inspect.signature(generator).parameters
    except (TypeError, ValueError):  # builtins / C callables have no signature
        return False


def call_generator(
    entry: KernelEntry,
    outs: tuple[Any, ...],
    ins: Sequence[Any],
    params: dict[str, Any],
) -> Callable[..., Any]:
    """Call ``entry``'s generator; pass ``ins`` only when its signature names it."""
    extra = {"ins": tuple(ins)} if _accepts_ins(entry.kernel_generator) else {}
    kernel = entry.kernel_generator(outs=outs, **params, **extra)
    if not callable(kernel):
        raise TypeError(
            f"the generator returned {type(kernel).__name__}, expected a callable "
            f"taking the inputs"
        )
    return kernel


def _as_list(result: Any, outs: Sequence[Any]) -> list[Any]:
    items = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(items) != len(outs):
        raise ValueError(
            f"the kernel returned {len(items)} array(s), expected {len(outs)} (one "
            f"per entry of `outs`)"
        )
    for i, (item, want) in enumerate(zip(items, outs, strict=True)):
        # Checked here: a mismatch would otherwise surface as an MLIR verifier
        # error that names neither the primitive nor the output.
        if not hasattr(item, "dtype"):  # a Python scalar
            item = np.asarray(item)
        # NumPy constants and Python scalars become JAX's canonical dtype when
        # lowered (float64 -> float32 without x64), so compare that one.
        got = (tuple(np.shape(item)), canonicalize_dtype(np.dtype(item.dtype)))
        if got != (tuple(want.shape), np.dtype(want.dtype)):
            raise ValueError(
                f"output {i}: the kernel returned {_describe(*got)} but `outs[{i}]` "
                f"declares {_describe(tuple(want.shape), np.dtype(want.dtype))}; make "
                f"`outs` describe what the kernel returns (or fix the kernel)"
            )
    return items


def _describe(shape: tuple[int, ...], dtype: np.dtype) -> str:
    return f"{dtype.name}{list(shape)}"


def _switch_hint(table: KernelTable, owner: str, platform: str, failed: str) -> str:
    others = [b for b in table.backends(platform) if b != failed]
    if not others:
        return (
            f"No other backend is registered for '{platform}'; register one with "
            f"def_kernel(backend, '{platform}', generator)."
        )
    return (
        f"Other backends registered for '{platform}': {others}. Switch with "
        f"set_default('{platform}', '{others[0]}') on XLACustomKernel '{owner}', "
        f"polykernel.set_backend('{platform}', '{others[0]}') for every primitive, "
        f"or pass backend='{others[0]}' to the call."
    )


def backend_lowering_context(
    entry: KernelEntry, platform: str
) -> contextlib.AbstractContextManager[Any]:
    """What the entry's backend needs around its kernel's lowering (asked of the
    backend table; a name no backend claims needs nothing)."""
    backend = backends.lookup(entry.backend)
    if backend is None:
        return contextlib.nullcontext()
    return backend.lowering_context(platform)


def make_lowering_rule(
    owner: str, table: KernelTable, platform: str, decide: Decide
) -> Callable[..., Any]:
    """Build the MLIR lowering rule of primitive ``owner`` for our ``platform``;
    ``decide(platform, avals, outs, params, backend)`` gives the kernel entry and
    the dispatch decision (its launch parameters)."""

    def rule(
        ctx: Any,
        *args: Any,
        outs: tuple[Any, ...],
        backend: str | None = None,
        **params: Any,
    ) -> Any:
        entry, decision = decide(platform, ctx.avals_in, outs, params, backend)
        # The call's own keywords win over the tuned (or first) launch parameters.
        params_in = {**decision.params, **params}
        shard_plan = plan_for(ctx, outs, entry.backend, params_in)
        try:
            # Kernels whose callable differs per platform (Triton, Numba-CUDA: an
            # emulator on cpu, a CUDA launch on gpu) read the platform from here.
            with lowering_for(platform):
                kernel = call_generator(entry, outs, ctx.avals_in, params_in)

            def body(*xs: Any) -> list[Any]:
                with lowering_for(platform):  # the kernel is traced here
                    return _as_list(kernel(*xs), outs)

            if shard_plan is not None:
                body = partitioned(ctx, shard_plan, body)
            with (
                lowering_for(platform),
                backend_lowering_context(entry, platform),
                unchecked_manual_axes(),
            ):
                lowered = lower_fun(body, multiple_results=True)
                return lowered(unsharded_inputs(ctx), *args)
        except KernelCompilationError:
            raise
        except Exception as err:
            raise KernelCompilationError(
                f"XLACustomKernel '{owner}': the '{entry.backend}' kernel for platform "
                f"'{platform}' failed to build or lower ({type(err).__name__}: {err}). "
                + _switch_hint(table, owner, platform, entry.backend)
            ) from err

    rule.__name__ = f"lower_{owner}_{platform}".replace(".", "_")
    return rule
