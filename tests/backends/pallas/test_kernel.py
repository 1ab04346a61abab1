"""pallas_kernel and def_pallas_kernel on the CPU (Pallas interpret mode)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.contract.platform_context import lowering_for, lowering_platform

F32 = jnp.float32


def axpy_body(x_ref, y_ref, o_ref, *, alpha=1.0):
    o_ref[...] = alpha * x_ref[...] + y_ref[...]


def axpy_generator(outs, alpha=1.0, **kw):
    kernel = pk.pallas_kernel(axpy_body, outs[0])
    return lambda x, y: kernel(x, y, alpha=alpha)


def make_axpy(name):
    op = pk.XLACustomKernel(name)
    op.def_pallas_kernel("cpu", axpy_generator)
    op.def_pallas_kernel("gpu", axpy_generator)
    # Tangent rules as plain jnp: reverse mode needs no rule from Pallas itself.
    op.def_jvp_rule2(
        lambda t, x, y, *, alpha, **kw: [alpha * t],
        lambda t, x, y, **kw: [t],
    )
    return op


def call(op, x, y, alpha=2.0):
    return op(x, y, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), alpha=alpha)


def test_def_pallas_kernel_registers_cpu_gpu_tpu():
    op = pk.XLACustomKernel("test.pallas.register")
    for platform in ("cpu", "gpu", "tpu"):
        op.def_pallas_kernel(platform, axpy_generator)
    assert op.defaults == {"cpu": "pallas", "gpu": "pallas", "tpu": "pallas"}


@pytest.mark.parametrize("platform", ["rocm", "cuda", "GPU", ""])
def test_def_pallas_kernel_rejects_other_platforms(platform):
    op = pk.XLACustomKernel(f"test.pallas.bad_platform_{platform}")
    with pytest.raises(pk.UnsupportedPlatformError) as info:
        op.def_pallas_kernel(platform, axpy_generator)
    # The reference documents AssertionError; our hierarchy says ValueError.
    assert isinstance(info.value, AssertionError)
    assert isinstance(info.value, ValueError)
    assert str(info.value) == (
        f"XLACustomKernel 'test.pallas.bad_platform_{platform}'.def_pallas_kernel(): "
        "platform "
        f"must be one of ['gpu', 'tpu', 'cpu'] (got {platform!r})."
    )
    assert op.available_backends("cpu") == []


def test_def_pallas_kernel_platform_type_error():
    op = pk.XLACustomKernel("test.pallas.platform_type")
    with pytest.raises(pk.KernelTypeError, match=r"platform must be a string"):
        op.def_pallas_kernel(None, axpy_generator)


def test_eager_and_jit_match_numpy():
    op = make_axpy("test.pallas.axpy")
    x = jnp.arange(10, dtype=F32)
    y = jnp.full(10, 0.5, F32)
    expected = 2.0 * np.arange(10, dtype=np.float32) + 0.5
    np.testing.assert_allclose(call(op, x, y), expected)
    np.testing.assert_allclose(jax.jit(lambda a, b: call(op, a, b))(x, y), expected)


def test_grad_goes_through_the_primitive_rules():
    # A bare pallas_call has no reverse mode: the primitive's JVP rule (and JAX's
    # transpose of its linear jnp tangents) make jax.grad work.
    op = make_axpy("test.pallas.grad")
    x = jnp.linspace(-1.0, 1.0, 6, dtype=F32)
    y = jnp.ones(6, F32)

    def loss(a, b):
        return jnp.sum(call(op, a, b, alpha=3.0) ** 2)

    gx, gy = jax.grad(loss, argnums=(0, 1))(x, y)
    out = 3.0 * x + y
    np.testing.assert_allclose(gx, 2 * out * 3.0, rtol=1e-6)
    np.testing.assert_allclose(gy, 2 * out, rtol=1e-6)
    gx_jit = jax.jit(jax.grad(loss))(x, y)
    np.testing.assert_allclose(gx_jit, gx, rtol=1e-6)


def double_body(x_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...]


def test_grad_through_a_transpose_rule_that_calls_the_pallas_primitive():
    # A linear primitive: its JVP re-binds itself on the tangent, and its transpose
    # binds it again on the cotangent, so reverse mode runs the Pallas kernel.
    op = pk.XLACustomKernel("test.pallas.linear")
    op.def_pallas_kernel("cpu", lambda outs, **kw: pk.pallas_kernel(double_body, outs))

    def jvp(primals, tangents, *, outs, **params):
        (x,), (t,) = primals, tangents
        return op.primitive.bind(x, outs=outs, **params), op.primitive.bind(
            t, outs=outs, **params
        )

    def transpose(cts, x, *, outs, **params):
        return op.primitive.bind(cts[0], outs=outs, **params)

    op.def_jvp_rule(jvp)
    op.def_transpose_rule(transpose)
    spec = jax.ShapeDtypeStruct((4,), F32)
    x = jnp.arange(4, dtype=F32)
    grad = jax.grad(lambda v: jnp.vdot(jnp.arange(1.0, 5.0), op(v, outs=spec)))(x)
    np.testing.assert_allclose(grad, 2.0 * np.arange(1.0, 5.0))


def test_vmap_gives_the_loop_result():
    op = make_axpy("test.pallas.vmap")
    xs = jnp.arange(12, dtype=F32).reshape(3, 4)
    ys = jnp.ones((3, 4), F32)
    out = jax.vmap(lambda a, b: call(op, a, b))(xs, ys)
    np.testing.assert_allclose(out, 2.0 * xs + 1.0)


def split_body(x_ref, lo_ref, hi_ref):
    x = x_ref[...]
    lo_ref[...] = jnp.minimum(x, 0.0)
    hi_ref[...] = (x > 0).astype(jnp.int32)


def test_multiple_outputs_grid_and_block_specs():
    pl = pytest.importorskip("jax.experimental.pallas")
    n, block = 16, 4
    spec = pl.BlockSpec((block,), lambda i: (i,))
    outs = (jax.ShapeDtypeStruct((n,), F32), jax.ShapeDtypeStruct((n,), jnp.int32))
    kernel = pk.pallas_kernel(
        split_body,
        list(outs),
        grid=(n // block,),
        in_specs=[spec],
        out_specs=(spec, spec),
        num_warps=2,  # a Triton knob: ignored in interpret mode
    )
    x = jnp.linspace(-2.0, 2.0, n, dtype=F32)
    lo, hi = jax.jit(kernel)(x)
    np.testing.assert_array_equal(lo, np.minimum(np.asarray(x), 0.0))
    np.testing.assert_array_equal(hi, (np.asarray(x) > 0).astype(np.int32))


def add_in_place_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def test_input_output_aliases():
    spec = jax.ShapeDtypeStruct((5,), F32)
    kernel = pk.pallas_kernel(add_in_place_body, spec, input_output_aliases={0: 0})
    out = jax.jit(kernel, donate_argnums=0)(jnp.ones(5, F32), jnp.ones(5, F32))
    np.testing.assert_allclose(out, np.full(5, 2.0))


def test_direct_call_uses_the_default_backend_and_interprets_on_cpu():
    kernel = pk.pallas_kernel(double_body, jax.ShapeDtypeStruct((3,), F32))
    assert lowering_platform() is None and kernel.platform() == "cpu"
    np.testing.assert_allclose(kernel(jnp.ones(3, F32)), [2.0, 2.0, 2.0])
    assert "pallas_kernel('double_body'" in repr(kernel)


def test_lowering_context_selects_the_platform():
    kernel = pk.pallas_kernel(double_body, jax.ShapeDtypeStruct((3,), F32))
    with lowering_for("gpu"):
        assert kernel.platform() == "gpu"
        inner = pk.pallas_kernel(double_body, jax.ShapeDtypeStruct((3,), F32))
    assert lowering_platform() is None
    # Built while lowering for gpu: traced later (sharding), it still builds for gpu.
    assert inner.platform() == "gpu" and kernel.platform() == "cpu"


def test_interpret_true_forces_interpret_mode_even_for_gpu():
    kernel = pk.pallas_kernel(
        double_body, jax.ShapeDtypeStruct((3,), F32), interpret=True
    )
    with lowering_for("gpu"):
        np.testing.assert_allclose(kernel(jnp.ones(3, F32)), [2.0, 2.0, 2.0])


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (
            ("not callable", jax.ShapeDtypeStruct((3,), F32)),
            {},
            pk.KernelTypeError,
            r"pallas_kernel: body must be a callable taking one ref per input and "
            r"output \(got str: 'not callable'\)\.",
        ),
        (
            (double_body, []),
            {},
            pk.KernelRegistrationError,
            r"pallas_kernel 'double_body': outs must be a jax.ShapeDtypeStruct or a "
            r"non-empty list/tuple \(or pytree\) of them, one per kernel output "
            r"\(got \[\]\)\.",
        ),
        (
            (double_body, [3]),
            {},
            pk.KernelTypeError,
            r"pallas_kernel 'double_body': outs\[0\] must have .shape and .dtype, "
            r"e.g. jax.ShapeDtypeStruct\(shape, dtype\) \(got int: 3\)\.",
        ),
        (
            (double_body, jax.ShapeDtypeStruct((3,), F32)),
            {"num_wraps": 4},
            pk.KernelRegistrationError,
            r"pallas_kernel 'double_body': unknown compiler parameter\(s\) "
            r"\['num_wraps'\]; the Pallas CompilerParams of this JAX take \[.*"
            r"'num_warps'.*\]\. Pass grid, in_specs, out_specs, interpret, "
            r"input_output_aliases and vmap_method by name\.",
        ),
        (
            (double_body, jax.ShapeDtypeStruct((3,), F32)),
            {"interpret": "yes"},
            pk.KernelTypeError,
            r"pallas_kernel 'double_body': interpret must be None, True or False "
            r"\(got 'yes'\)\.",
        ),
    ],
)
def test_pallas_kernel_argument_errors(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        pk.pallas_kernel(*args, **kwargs)


def test_a_failing_body_names_the_backend_and_the_alternatives():
    def broken(x_ref, o_ref):
        o_ref[...] = x_ref[...] @ x_ref[...][None]  # shape error at trace time

    op = pk.XLACustomKernel("test.pallas.broken")
    op.def_pallas_kernel("cpu", lambda outs, **kw: pk.pallas_kernel(broken, outs[0]))
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    spec = jax.ShapeDtypeStruct((3,), F32)
    with pytest.raises(
        pk.KernelCompilationError,
        match=r"the 'pallas' kernel for platform 'cpu' failed to build or lower .*"
        r"Other backends registered for 'cpu': \['jax_raw'\]",
    ):
        op(jnp.ones(3, F32), outs=[spec])


@pytest.mark.slow
def test_tpu_kernel_lowers_to_a_mosaic_custom_call():
    # Lowered only: no TPU here. TPU compiler parameters reach Mosaic; the Triton
    # knob in the same call is ignored on this platform.
    op = pk.XLACustomKernel("test.pallas.tpu")
    op.def_pallas_kernel(
        "tpu",
        lambda outs, **kw: pk.pallas_kernel(
            add_in_place_body, outs[0], vmem_limit_bytes=1 << 24, num_warps=4
        ),
    )
    spec = jax.ShapeDtypeStruct((8, 128), F32)
    exported = jax.export.export(
        jax.jit(lambda x, y: op(x, y, outs=spec)), platforms=("tpu",)
    )(spec, spec)
    calls = [
        line
        for line in exported.mlir_module().splitlines()
        if "stablehlo.custom_call" in line
    ]
    assert len(calls) == 1 and "@tpu_custom_call" in calls[0]


def test_zero_size_outputs_need_no_kernel_run():
    # Pallas fails on zero-size blocks; an empty output has nothing to compute.
    def double(x_ref, o_ref):
        o_ref[...] = 2 * x_ref[...]

    empty = jax.ShapeDtypeStruct((0,), jnp.float32)
    one = pk.pallas_kernel(double, empty)
    assert jax.jit(one)(jnp.zeros(0, jnp.float32)).shape == (0,)
    two = pk.pallas_kernel(lambda x, a, b: None, [empty, empty])
    a, b = two(jnp.zeros(0, jnp.float32))
    assert a.shape == b.shape == (0,)
