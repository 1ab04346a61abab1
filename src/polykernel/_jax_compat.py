"""The only module that touches JAX internals or version-dependent JAX APIs.

Everything else in polykernel imports JAX rule tables, abstract values and lowering
helpers from here, so a JAX release that moves a symbol is fixed in one place.
Tested against the newest JAX for Python 3.11 (0.10.x) and for Python 3.12 (0.12.x).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import jax
import jax.core
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from .platforms import Platform, platform_of

__all__ = [
    "Primitive", "ShapedArray", "UndefinedPrimal", "Zero", "abstract_gpu_target",
    "all_devices", "apply_primitive", "aval_of", "backends_initialised",
    "bump_dispatch_epoch", "config_value", "custom_partitioning",
    "default_device_platform", "distributed_job", "explicit_leading_axes",
    "gpu_target_context", "has_jvp_rule", "has_transpose_rule", "instantiate_zeros",
    "is_undefined_primal", "linear_operand_positions", "lower_fun", "lowering_mesh",
    "pallas_api", "pallas_compiler_params_class", "register_lowering",
    "require_devices_during_lowering", "set_batching_rule", "set_jvp_rule",
    "set_transpose_rule", "shardy_enabled", "tracing", "unchecked_manual_axes",
    "unsharded_inputs", "zero_tangent"
]  # fmt: skip

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


def has_jvp_rule(prim: Primitive) -> bool:
    """Whether ``prim`` has a JVP rule (forward-mode differentiation)."""
    return prim in ad.primitive_jvps


def has_transpose_rule(prim: Primitive) -> bool:
    """Whether ``prim`` has a transpose rule (reverse mode of a linear input)."""
    return prim in ad.primitive_transposes


# -- sharding ------------------------------------------------------------------------
def custom_partitioning(fun: Any) -> Any:
    """``jax.experimental.custom_partitioning.custom_partitioning`` (0.10 - 0.12)."""
    from jax.experimental.custom_partitioning import custom_partitioning as cp

    return cp(fun)


def mark_module(ctx: Any, name: str, value: str) -> None:
    """Set attribute ``name`` (a string) on the module ``ctx`` is lowering into: part
    of the bytes JAX hashes into its persistent compilation cache key (0.10 - 0.12);
    XLA ignores attributes it does not know."""
    module = ctx.module_context.module.operation
    module.attributes[name] = mlir.ir.StringAttr.get(value)


def config_value(name: str) -> Any:
    """The current value of JAX option ``name`` (``jax.config.<name>``, which JAX
    0.10's ``Config`` does not declare to a type checker)."""
    return getattr(jax.config, name)


def shardy_enabled() -> bool:
    """Whether programs are partitioned by Shardy (the default since JAX 0.7)."""
    return bool(config_value("jax_use_shardy_partitioner"))


def require_devices_during_lowering(prim: Primitive) -> None:
    """Make jit pass the device assignment to ``prim``'s lowering rule.

    Without it JAX may lower a sharded program before devices are known, and a
    lowering rule cannot build the mesh that ``custom_partitioning`` needs.
    """
    from jax._src import dispatch

    dispatch.prim_requires_devices_during_lowering.add(prim)


def lowering_mesh(ctx: Any) -> Any:
    """The mesh a lowering is automatically partitioned over, or ``None``.

    ``None`` when there is nothing to partition: one device, a fully manual
    ``shard_map`` body (the operands already are per-shard blocks), a partially
    manual one, ``pmap``, or a sharding without a mesh.
    """
    import numpy as np
    from jax._src import sharding_impls
    from jax.sharding import Mesh

    axis_context = ctx.module_context.axis_context
    if not isinstance(axis_context, sharding_impls.ShardingContext):
        return None
    devices = axis_context.device_assignment
    abstract = axis_context.abstract_mesh
    if devices is None or len(devices) <= 1 or abstract is None or abstract.empty:
        return None
    if int(np.prod(abstract.axis_sizes)) != len(devices):
        return None
    return Mesh(np.array(devices).reshape(abstract.axis_sizes), abstract.axis_names)


def unchecked_manual_axes() -> contextlib.AbstractContextManager[Any]:
    """Around a kernel's tracing at lowering: no varying-manual-axes checks.

    The kernel sees plain arrays (:func:`unsharded_inputs`), also inside a
    ``shard_map`` body, where JAX would otherwise ask code such as Pallas'
    ``pallas_call`` to type its outputs with the mesh axes they vary over.
    """
    from jax._src import config

    return config._check_vma(False)


def unsharded_inputs(ctx: Any) -> Any:
    """``ctx`` with input avals that carry no sharding type.

    A kernel computes on whole arrays: with a mesh of ``Explicit`` axes its avals
    would carry their shardings, and pure-JAX kernel code (a gather, ``segment_sum``)
    would then have to resolve sharding-in-types questions it cannot answer.
    """
    plain = [
        ShapedArray(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))
        if isinstance(a, ShapedArray)
        else a
        for a in ctx.avals_in
    ]
    return ctx.replace(avals_in=plain)


def explicit_leading_axes(x: Any) -> tuple[Any, tuple[str, ...]] | None:
    """``(mesh, axis names)`` splitting ``x``'s leading dimension in its type, or None.

    Only ``Explicit`` mesh axes appear in an array's type (``jax.typeof(x).sharding``);
    an auto-sharded or unsharded leading dimension gives None.
    """
    sharding = getattr(jax.typeof(x), "sharding", None)
    spec = getattr(sharding, "spec", None)
    if not spec or spec[0] is None:
        return None
    first = spec[0]
    names = (first,) if isinstance(first, str) else tuple(first)
    return sharding.mesh, names  # pyright: ignore[reportOptionalMemberAccess]


def linear_operand_positions(linear_fn: Any, example: Any, prim: Primitive) -> set[int]:
    """Operand positions of ``prim`` that the input of ``linear_fn`` flows into.

    ``linear_fn`` is a linearized function (``jax.linearize``); the positions are
    the inputs of ``prim`` its transpose rule must handle. Calls inside ``jit``
    (``pjit``) are followed; other higher-order primitives are not looked into.
    """
    from jax.extend import core

    closed = jax.make_jaxpr(linear_fn)(example)
    positions: set[int] = set()

    def walk(jaxpr: Any, reached: set[Any]) -> set[Any]:
        for eqn in jaxpr.eqns:
            hits = [
                k
                for k, v in enumerate(eqn.invars)
                if not isinstance(v, core.Literal) and v in reached
            ]
            if not hits:
                continue
            if eqn.primitive is prim:
                positions.update(hits)
            inner = eqn.params.get("jaxpr")
            # JAX 0.12 re-exports it as `Jaxpr as ClosedJaxpr`, which a checker
            # reads as private (JAX 0.10 exports ClosedJaxpr itself).
            if isinstance(inner, core.ClosedJaxpr):  # pyright: ignore[reportPrivateImportUsage]
                sub = {inner.jaxpr.invars[k] for k in hits}
                out = walk(inner.jaxpr, sub)
                pairs = zip(eqn.outvars, inner.jaxpr.outvars, strict=True)
                reached.update(
                    o
                    for o, io in pairs
                    if not isinstance(io, core.Literal) and io in out
                )
            else:
                reached.update(eqn.outvars)
        return reached

    walk(closed.jaxpr, set(closed.jaxpr.invars))
    return positions


# -- Pallas --------------------------------------------------------------------------
def pallas_api() -> Any:
    """``jax.experimental.pallas`` (public in 0.10 - 0.12), imported on first use.

    Not imported by ``import polykernel``: Pallas pulls in its lowering machinery.
    """
    from jax.experimental import pallas

    return pallas


def pallas_compiler_params_class(platform: str) -> Any:
    """The Pallas ``CompilerParams`` class of ``platform`` (gpu: Triton's; tpu).

    Returns ``None`` for ``'cpu'`` (interpret mode takes no compiler parameters) or
    when the platform's Pallas module cannot be imported in this jaxlib.
    """
    try:
        if platform == "gpu":
            from jax.experimental.pallas import triton as pallas_triton

            return pallas_triton.CompilerParams
        if platform == "tpu":
            from jax.experimental.pallas import tpu as pallas_tpu

            return pallas_tpu.CompilerParams
    except (ImportError, AttributeError):
        return None
    return None


def abstract_gpu_target(device_kind: str = "NVIDIA H100 80GB HBM3") -> Any:
    """A context in which GPU lowering targets ``device_kind`` without a GPU present.

    Pallas' Triton lowering asks for the GPU's compute capability: JAX 0.10 assumes
    sm_90 when no GPU is visible, JAX 0.11+ reads it from the abstract device of the
    current abstract mesh. This sets a one-device abstract mesh with that device
    (public ``jax.sharding`` API in 0.10 - 0.12), so a ``jax.export`` or ``.lower``
    for ``cuda`` works on a CPU-only machine.
    """
    device = jax.sharding.AbstractDevice(
        device_kind=device_kind, num_cores=None, platform="gpu"
    )
    mesh = jax.sharding.AbstractMesh((1,), ("_polykernel_gpu",), abstract_device=device)
    return jax.sharding.use_abstract_mesh(mesh)


def gpu_target_context(aot_device_kind: str) -> Any:
    """What a GPU lowering needs around it to learn its target GPU.

    Pallas' Triton lowering reads the target from the abstract device of the current
    abstract mesh, else from JAX's *default* device. Nothing is needed when either is
    a GPU. When a GPU is visible but is not the default device (``JAX_PLATFORMS=
    cpu,cuda``, data put on the GPU), that GPU is made the default for the lowering;
    with no GPU at all, the lowering targets the abstract ``aot_device_kind``.
    """
    device = jax.sharding.get_abstract_mesh().abstract_device
    if device is not None and platform_of(device.platform) == Platform.GPU:
        return contextlib.nullcontext()
    if default_device_platform() == Platform.GPU:
        return contextlib.nullcontext()
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if gpus:
        return jax.default_device(gpus[0])
    return abstract_gpu_target(aot_device_kind)


def backends_initialised() -> bool:
    """Whether a JAX backend has started in this process (without starting one).

    Until one has, ``jax.distributed.initialize`` and ``jax_num_cpu_devices`` may
    still be set: polykernel never starts a backend to load or register a kernel.
    """
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def all_devices() -> list[Any]:
    """Every device of every platform this process's JAX has (CPU, GPU, TPU).

    ``jax.devices()`` lists the *default* platform's devices only: under
    ``JAX_PLATFORMS=cpu,cuda`` that is the CPU alone, and a GPU looked for there is
    never found (a kernel built for a guessed architecture, a platform left
    unchecked).
    """
    found: list[Any] = []
    for platform in ("cpu", "gpu", "tpu"):
        try:
            found.extend(jax.devices(platform))
        except RuntimeError:  # no such platform in this process
            continue
    return found


def tracing() -> bool:
    """Whether code runs inside a JAX transformation (``jit``, ``vmap``, ``grad``...)
    rather than eagerly at the top level."""
    from jax._src import core

    return not core.trace_state_clean()


def default_device_platform() -> str:
    """The platform (ours: cpu/gpu/tpu) of JAX's default device.

    The default device honours ``jax.default_device(...)`` (a device or a platform
    name), else it is the default backend's first device.
    """
    device = config_value("jax_default_device") or jax.devices()[0]
    name = device if isinstance(device, str) else device.platform
    return platform_of(name) or name


def distributed_job() -> tuple[Any, int, int] | None:
    """``(client, process index, process count)`` of the ``jax.distributed`` job
    this process belongs to, or None when it runs alone (not initialised, or one
    process). The client is the job's key-value store (``key_value_set``,
    ``blocking_key_value_get``, ``key_value_try_get``): the same methods on every
    JAX line we support. Starts no backend."""
    from jax._src import distributed

    state = distributed.global_state
    client = getattr(state, "client", None)
    count = getattr(state, "num_processes", None) or 1
    if client is None or count < 2:
        return None
    return client, int(state.process_id or 0), int(count)
