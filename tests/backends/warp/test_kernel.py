"""pk.warp_kernel on CPU: Warp's compiled CPU entry point behind a native handler."""

from __future__ import annotations

import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk

wp = pytest.importorskip("warp")
F32 = jax.ShapeDtypeStruct((8,), jnp.float32)


# The scalar comes first: a parameter named by a call keyword is that scalar,
# wherever it stands; the others take the buffers in order (x, y, then out).
@wp.kernel
def axpy(alpha: wp.float32, x: wp.array(dtype=wp.float32),
         y: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):  # fmt: skip
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


@wp.kernel
def split(x: wp.array(dtype=wp.float32), lo: wp.array(dtype=wp.float32),
          hi: wp.array(dtype=wp.int32), cut: wp.float32, flip: wp.bool):  # fmt: skip
    i = wp.tid()
    v = x[i]
    if flip:
        v = -v
    lo[i] = wp.min(v, cut)
    hi[i] = wp.where(v > cut, 1, 0)


@wp.kernel
def rows(m: wp.array2d(dtype=wp.float32), out: wp.array2d(dtype=wp.float32)):
    i, j = wp.tid()
    out[i, j] = m[i, j] * wp.float32(i + 1) + wp.float32(j)


@wp.kernel
def accumulate(acc: wp.array(dtype=wp.float32), x: wp.array(dtype=wp.float32),
               out: wp.array(dtype=wp.float32)):  # fmt: skip
    i = wp.tid()
    out[i] = out[i] + x[i]


@wp.kernel
def halve(x: wp.array(dtype=wp.float16), out: wp.array(dtype=wp.float16)):
    i = wp.tid()
    out[i] = x[i] * wp.float16(0.5)


X = jnp.arange(8, dtype=jnp.float32)
Y = jnp.ones(8, jnp.float32)


def test_eager_and_jit_match_numpy():
    f = pk.warp_kernel(axpy, F32)
    np.testing.assert_allclose(f(X, Y, alpha=2.0), 2 * X + 1)
    g = jax.jit(lambda x, y: f(x, y, alpha=np.float32(-1.5)))
    np.testing.assert_allclose(g(X, Y), -1.5 * X + 1)


def test_multiple_outputs_and_scalars_of_several_dtypes():
    outs = [jax.ShapeDtypeStruct((5,), jnp.float32),
            jax.ShapeDtypeStruct((5,), jnp.int32)]  # fmt: skip
    f = pk.warp_kernel(split, outs)
    x = np.linspace(-2, 2, 5).astype(np.float32)
    lo, hi = f(x, cut=0.5, flip=False)
    np.testing.assert_allclose(lo, np.minimum(x, 0.5))
    np.testing.assert_array_equal(hi, (x > 0.5).astype(np.int32))
    lo, _ = f(x, cut=0.5, flip=True)
    np.testing.assert_allclose(lo, np.minimum(-x, 0.5))


def test_two_dimensional_launch_over_the_first_array_and_explicit_launch_dims():
    m = jnp.ones((3, 4), jnp.float32)
    ref = np.ones((3, 4)) * np.arange(1, 4)[:, None] + np.arange(4)
    out = jax.ShapeDtypeStruct((3, 4), jnp.float32)
    np.testing.assert_allclose(pk.warp_kernel(rows, out)(m), ref)
    part = pk.warp_kernel(rows, out, launch_dims=(2, 4))(m)  # row 2 untouched
    np.testing.assert_allclose(part[:2], ref[:2])


def test_aliased_output_is_updated_in_place():
    f = pk.warp_kernel(accumulate, F32, input_output_aliases={0: 0})
    acc = jnp.full(8, 10.0, jnp.float32)
    np.testing.assert_allclose(jax.jit(f)(acc, X), 10 + X)


def test_float16_buffers_reach_warp_as_float16():
    f = pk.warp_kernel(halve, jax.ShapeDtypeStruct((4,), jnp.float16))
    x = jnp.array([1, 2, 3, 4], jnp.float16)
    out = f(x)
    assert out.dtype == jnp.float16
    np.testing.assert_allclose(out.astype(np.float32), [0.5, 1, 1.5, 2])


@pytest.mark.parametrize(
    "method",
    [
        None,
        "sequential",
        "sequential_unrolled",
        "expand_dims",
        "broadcast_all",
    ],
)
def test_vmap_gives_the_per_slice_result_under_every_method(method):
    f = pk.warp_kernel(axpy, F32, vmap_method=method)
    xs = jnp.stack([X, 2 * X, 3 * X])
    got = jax.vmap(lambda x: f(x, Y, alpha=2.0))(xs)  # y is not batched
    np.testing.assert_allclose(got, 2 * xs + 1)
    ys = jnp.stack([Y, 2 * Y, 3 * Y])
    got = jax.jit(jax.vmap(lambda x, y: f(x, y, alpha=1.0)))(xs, ys)
    np.testing.assert_allclose(got, xs + ys)


def test_vmap_of_an_aliased_kernel():
    f = pk.warp_kernel(accumulate, F32, input_output_aliases={0: 0})
    accs = jnp.stack([jnp.zeros(8), jnp.ones(8)]).astype(jnp.float32)
    np.testing.assert_allclose(jax.vmap(lambda a: f(a, X))(accs), accs + X)


def test_a_primitive_with_warp_on_cpu_supports_jvp_and_grad_through_its_rules():
    op = pk.XLACustomKernel("test_warp.scale")

    def gen(outs, **kw):
        f = pk.warp_kernel(axpy, outs[0])
        return lambda x, y: f(x, y, alpha=kw["alpha"])

    op.def_kernel("warp", "cpu", gen)
    op.def_warp_kernel(gen)  # the same generator for the GPU
    assert op.available_backends("cpu") == ["warp"]
    assert op.available_backends("gpu") == ["warp"]

    def call(x, y, alpha=2.0):
        return op(x, y, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)], alpha=alpha)[0]

    op.def_jvp_rule2(lambda dx, x, y, **kw: call(dx, jnp.zeros_like(y), kw["alpha"]),
                     lambda dy, x, y, **kw: dy)  # fmt: skip
    op.def_transpose_rule(
        lambda ct, x, y, **kw: [
            call(ct[0], jnp.zeros_like(ct[0]), kw["alpha"])
            if jax.interpreters.ad.is_undefined_primal(x) else None,
            ct[0] if jax.interpreters.ad.is_undefined_primal(y) else None,
        ]
    )  # fmt: skip
    np.testing.assert_allclose(jax.jit(call)(X, Y), 2 * X + 1)
    _, tangent = jax.jvp(call, (X, Y), (Y, Y))
    np.testing.assert_allclose(tangent, 3 * Y)
    grad = jax.grad(lambda x: call(x, Y).sum())(X)
    np.testing.assert_allclose(grad, np.full(8, 2.0))


def test_registration_errors_are_pinned():
    with pytest.raises(
        pk.KernelTypeError, match=r"expected a @wp\.kernel, got function"
    ):
        pk.warp_kernel(lambda x: x, F32)
    with pytest.raises(pk.KernelRegistrationError, match="vmap_method must be one of"):
        pk.warp_kernel(axpy, F32, vmap_method="loop")
    with pytest.raises(ValueError, match=r"launch_dims must be an int or a tuple of "
                       r"1 to 4 ints, got \(1, 2, 3, 4, 5\)"):  # fmt: skip
        pk.warp_kernel(axpy, F32, launch_dims=(1, 2, 3, 4, 5))
    with pytest.raises(ValueError, match="maps input 0 to output 3, but there are 1"):
        pk.warp_kernel(axpy, F32, input_output_aliases={0: 3})
    with pytest.raises(
        pk.UnsupportedDtypeError,
        match=r"outs\[0\] has dtype "
        r"bfloat16, which the warp backend cannot take; it takes bool",
    ):
        pk.warp_kernel(axpy, jax.ShapeDtypeStruct((8,), jnp.bfloat16))


def test_call_errors_name_the_parameter_expected_and_got():
    f = pk.warp_kernel(axpy, F32)
    with pytest.raises(ValueError, match=r"3 array parameters \(x, y, out\) .* "
                       "passes 1 inputs and declares 1 outputs"):  # fmt: skip
        f(X, alpha=1.0)
    with pytest.raises(TypeError, match="input 1 has dtype int32 but parameter 'y' "
                       "is an array of float32"):  # fmt: skip
        f(X, Y.astype(jnp.int32), alpha=1.0)
    with pytest.raises(TypeError, match=r"input 0 has shape \(2, 4\) \(rank 2\) but "
                       "parameter 'x' is a 1-d array"):  # fmt: skip
        f(X.reshape(2, 4), Y, alpha=1.0)
    with pytest.raises(
        pk.KernelCallError,
        match=r"warp_kernel 'axpy': unknown "
        r"keyword argument 'beta' \(parameters: alpha: float32\)",
    ):
        f(X, Y, beta=1.0)
    with pytest.raises(
        pk.KernelCallError,
        match=r"warp_kernel 'axpy': missing "
        r"keyword argument 'alpha' \(parameters: alpha: float32\)",
    ):
        f(X, Y)
    with pytest.raises(pk.KernelCallError, match="attribute 'alpha' is a traced value"):
        jax.jit(lambda a: f(X, Y, alpha=a))(1.0)


CHILD = r"""
import re, jax, jax.numpy as jnp, warp as wp
import polykernel as pk

@wp.kernel
def twice(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = 2.0 * x[i]

f = pk.warp_kernel(twice, jax.ShapeDtypeStruct((4,), jnp.float32))
x = jnp.ones(4, jnp.float32)
assert f(x).tolist() == [2.0] * 4
print(re.search(r"pk_warp_[0-9a-f]{24}", jax.jit(f).lower(x).as_text()).group(0))
"""


@pytest.mark.slow
def test_cpu_target_names_are_the_same_in_every_process(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    names = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], env=env, text=True,
                              capture_output=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        names.append(proc.stdout.strip().splitlines()[-1])
    assert names[0] == names[1] and names[0].startswith("pk_warp_")


@wp.kernel(module="unique")
def _vec_array(x: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.float32)):
    pass


@wp.kernel(module="unique")
def _vec_scalar(x: wp.array(dtype=wp.float32), v: wp.vec3,
                out: wp.array(dtype=wp.float32)):  # fmt: skip
    pass


@wp.kernel(module="unique")
def _generic(x: wp.array(dtype=typing.Any), out: wp.array(dtype=wp.float32)):
    pass


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (_vec_array, "array parameter 'x' has dtype vec3"),
        (_vec_scalar, "parameter 'v' has type"),
        (_generic, "the kernel is generic"),
    ],
)
def test_parameter_types_polykernel_cannot_pass_are_refused(kernel, message):
    with pytest.raises(TypeError, match=message):
        pk.warp_kernel(kernel, F32)


@wp.kernel
def typed_scale(x: wp.array[wp.float32], m: wp.array2d[wp.int32],
                out: wp.array[wp.float32]):  # fmt: skip
    i = wp.tid()
    out[i] = 2.0 * x[i] + float(m[0, i])


def test_typed_array_annotations_are_plain_arrays():
    # Warp's typed form wp.array[dtype] is an annotation object, not a wp.array.
    f = pk.warp_kernel(typed_scale, jax.ShapeDtypeStruct((3,), jnp.float32))
    x = jnp.arange(3, dtype=jnp.float32)
    m = jnp.ones((1, 3), jnp.int32)
    np.testing.assert_array_equal(f(x, m), 2 * np.asarray(x) + 1)
    np.testing.assert_array_equal(jax.jit(f)(x, m), 2 * np.asarray(x) + 1)


def test_an_indexed_array_parameter_is_refused_by_name():
    @wp.kernel
    def gather(x: wp.indexedarray[wp.float32], out: wp.array[wp.float32]):
        i = wp.tid()
        out[i] = x[i]

    with pytest.raises(pk.KernelTypeError, match="parameter 'x'"):
        pk.warp_kernel(gather, jax.ShapeDtypeStruct((3,), jnp.float32))(jnp.ones(3))
