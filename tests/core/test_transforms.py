"""vmap, jvp, grad and transpose of XLACustomKernel primitives against references."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from grad_checks import assert_grads_match

import polykernel as pk

_ids = itertools.count()
RNG = np.random.default_rng(0)


def rand(*shape):
    return jnp.asarray(RNG.standard_normal(shape), dtype=jnp.float32)


def make_affine():
    """out0 = a * x + b (elementwise), out1 = sum(x * b): two outputs, three inputs."""
    op = pk.XLACustomKernel(f"test.transforms.affine{next(_ids)}")
    op.def_kernel(
        "jax_raw", "cpu", lambda outs, **kw: lambda a, x, b: (a * x + b, jnp.sum(x * b))
    )

    def call(a, x, b):
        return op(
            a,
            x,
            b,
            outs=[
                jax.ShapeDtypeStruct(x.shape, x.dtype),
                jax.ShapeDtypeStruct((), x.dtype),
            ],
        )

    return op, call


def reference_affine(a, x, b):
    return [a * x + b, jnp.sum(x * b)]


IN_AXES = [
    (0, 0, 0),
    (None, 0, None),
    (0, None, 0),
    (1, 1, None),
    (None, None, 1),
    (1, 0, None),
]


@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
def test_vmap_matches_python_loop(in_axes):
    _, call = make_affine()
    batch, n = 3, 5
    args = [
        rand(batch, n) if ax == 0 else rand(n, batch) if ax == 1 else rand(n)
        for ax in in_axes
    ]
    got = jax.vmap(call, in_axes=in_axes)(*args)
    for k in range(batch):
        sliced = [
            a if ax is None else jnp.take(a, k, axis=ax)
            for a, ax in zip(args, in_axes, strict=True)
        ]
        expected = reference_affine(*sliced)
        np.testing.assert_allclose(got[0][k], expected[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1][k], expected[1], rtol=1e-5, atol=1e-6)


def test_vmap_all_unbatched_and_nested_and_under_jit():
    _, call = make_affine()
    a, x, b = rand(4), rand(2, 3, 4), rand(4)
    nested = jax.jit(
        jax.vmap(jax.vmap(call, in_axes=(None, 0, None)), in_axes=(None, 0, None))
    )(a, x, b)
    np.testing.assert_allclose(nested[0], a * x + b, rtol=1e-5)
    np.testing.assert_allclose(nested[1], jnp.sum(x * b, axis=-1), rtol=1e-5)
    out = jax.vmap(lambda _: call(a, x[0, 0], b))(jnp.arange(2))
    np.testing.assert_allclose(
        out[0], jnp.broadcast_to(a * x[0, 0] + b, (2, 4)), rtol=1e-5
    )


def test_custom_batching_rule_replaces_and_general_rule_restores():
    op, call = make_affine()
    used = []

    def rule(args, axes, **params):
        used.append(axes)
        return pk.general_batching_rule(op.primitive, args, axes, **params)

    op.def_batching_rule(rule)
    x = rand(2, 4)
    jax.vmap(call, in_axes=(None, 0, None))(rand(4), x, rand(4))
    assert used == [(None, 0, None)]
    op.register_general_batching()
    jax.vmap(call, in_axes=(None, 0, None))(rand(4), x, rand(4))
    assert len(used) == 1


def attach_affine_jvp(op):
    def d_a(t, a, x, b, **params):
        return [t * x, None]

    def d_x(t, a, x, b, **params):
        return [a * t, jnp.sum(t * b)]

    def d_b(t, a, x, b, **params):
        return [t, jnp.sum(x * t)]

    op.def_jvp_rule2(d_a, d_x, d_b)


def test_jvp_matches_finite_differences():
    op, call = make_affine()
    attach_affine_jvp(op)
    primals = [rand(6), rand(6), rand(6)]
    tangents = [rand(6), rand(6), rand(6)]
    out, tan = jax.jvp(lambda *p: call(*p), primals, tangents)
    eps = 1e-3
    plus = reference_affine(
        *[p + eps * t for p, t in zip(primals, tangents, strict=True)]
    )
    minus = reference_affine(
        *[p - eps * t for p, t in zip(primals, tangents, strict=True)]
    )
    for k in range(2):
        fd = (plus[k] - minus[k]) / (2 * eps)
        np.testing.assert_allclose(tan[k], fd, rtol=2e-2, atol=2e-3)
        np.testing.assert_allclose(out[k], reference_affine(*primals)[k], rtol=1e-5)


def test_jacfwd_matches_reference_jacobian():
    op, call = make_affine()
    attach_affine_jvp(op)
    a, x, b = rand(4), rand(4), rand(4)
    jac = jax.jacfwd(lambda x: call(a, x, b)[0])(x)
    np.testing.assert_allclose(jac, jnp.diag(a), rtol=1e-6)
    jac_ref = jax.jacfwd(lambda x: reference_affine(a, x, b)[1])(x)
    np.testing.assert_allclose(
        jax.jacfwd(lambda x: call(a, x, b)[1])(x), jac_ref, rtol=1e-6
    )


def test_jvp_with_zero_rule_and_symbolic_zero_tangents():
    op, call = make_affine()
    op.def_jvp_rule2(None, lambda t, a, x, b, **kw: [a * t, jnp.sum(t * b)], None)
    a, x, b = rand(3), rand(3), rand(3)
    _, tan = jax.jvp(lambda x: call(a, x, b), [x], [jnp.ones(3)])
    np.testing.assert_allclose(tan[0], a, rtol=1e-6)
    # Only `a` varies and its rule is None: every output tangent is zero.
    _, tan = jax.jvp(lambda a: call(a, x, b), [a], [jnp.ones(3)])
    np.testing.assert_allclose(tan[0], 0.0)
    np.testing.assert_allclose(tan[1], 0.0)


def test_jvp_rule_count_mismatch_is_reported():
    op, call = make_affine()
    op.def_jvp_rule2(None, None)
    with pytest.raises(
        pk.KernelRegistrationError,
        match=r"2 JVP rule\(s\) were given but the primitive was called "
        r"with 3 input\(s\)",
    ):
        jax.jvp(lambda x: call(x, x, x), [rand(3)], [rand(3)])


def test_jvp_rule_returning_wrong_count_is_reported():
    op, call = make_affine()
    op.def_jvp_rule2(lambda t, *a, **kw: [t], None, None)
    with pytest.raises(
        pk.KernelRegistrationError,
        match=r"rule for input 0 returned 1 tangent\(s\), expected 2",
    ):
        jax.jvp(lambda a: call(a, rand(3), rand(3)), [rand(3)], [rand(3)])


def test_monolithic_jvp_rule():
    op, call = make_affine()

    def jvp(primals, tangents, **params):
        a, x, b = primals
        ta, tx, tb = (
            jnp.zeros_like(p) if type(t) is jax.interpreters.ad.Zero else t
            for p, t in zip(primals, tangents, strict=True)
        )
        out = op.primitive.bind(*primals, **params)
        return out, [ta * x + a * tx + tb, jnp.sum(tx * b + x * tb)]

    op.def_jvp_rule(jvp)
    a, x, b = rand(3), rand(3), rand(3)
    _, tan = jax.jvp(lambda x: call(a, x, b), [x], [jnp.ones(3)])
    np.testing.assert_allclose(tan[0], a, rtol=1e-6)


# -- a linear primitive: y = A @ x, with JVP + transpose for x ------------------------
def make_matvec():
    op = pk.XLACustomKernel(f"test.transforms.matvec{next(_ids)}")
    op.def_kernel(
        "jax_raw",
        "cpu",
        lambda outs, transpose, **kw: lambda A, x: ((A.T if transpose else A) @ x,),
    )

    def call(A, x, transpose=False):
        n = A.shape[1] if transpose else A.shape[0]
        return op(
            A, x, outs=[jax.ShapeDtypeStruct((n,), x.dtype)], transpose=transpose
        )[0]

    def d_A(t, A, x, *, transpose, **kw):
        return [(t.T if transpose else t) @ x]

    def d_x(t, A, x, *, transpose, **kw):
        return [call(A, t, transpose)]

    def transpose_rule(cts, A, x, *, transpose, **params):
        (ct,) = cts
        assert pk_is_undefined(x) and not pk_is_undefined(A)
        ct = (
            jnp.zeros(x.aval.shape, x.aval.dtype)
            if type(ct) is jax.interpreters.ad.Zero
            else ct
        )
        return None, call(A, ct, not transpose)

    op.def_jvp_rule2(d_A, d_x)
    op.def_transpose_rule(transpose_rule)
    return op, call


def pk_is_undefined(x):
    return jax.interpreters.ad.is_undefined_primal(x)


def test_transpose_dot_product_identity():
    _, call = make_matvec()
    A, x, ct = rand(5, 3), rand(3), rand(5)
    (transposed,) = jax.linear_transpose(lambda v: call(A, v), x)(ct)
    lhs = jnp.vdot(ct, call(A, x))
    rhs = jnp.vdot(transposed, x)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5)
    np.testing.assert_allclose(transposed, A.T @ ct, rtol=1e-5)


def test_grad_vjp_and_vmap_of_grad():
    _, call = make_matvec()
    A, x = rand(4, 3), rand(3)
    loss = lambda A, x: jnp.sum(jnp.sin(call(A, x)))  # noqa: E731
    ref = lambda A, x: jnp.sum(jnp.sin(A @ x))  # noqa: E731
    assert_grads_match(loss, ref, (A, x), rtol=1e-5, atol=1e-6)
    _, vjp = jax.vjp(lambda v: call(A, v), x)
    ct = rand(4)
    np.testing.assert_allclose(vjp(ct)[0], A.T @ ct, rtol=1e-5)
    xs = rand(6, 3)
    batched = jax.vmap(jax.grad(loss, 1), in_axes=(None, 0))(A, xs)
    expected = jax.vmap(jax.grad(ref, 1), in_axes=(None, 0))(A, xs)
    np.testing.assert_allclose(batched, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        jax.jit(jax.grad(loss, 1))(A, x), jax.grad(ref, 1)(A, x), rtol=1e-5, atol=1e-6
    )


def test_defjvp_accepts_a_kernel_or_a_primitive():
    op, call = make_affine()
    pk.defjvp(op, None, lambda t, a, x, b, **kw: [a * t, None], None)
    a, x, b = rand(3), rand(3), rand(3)
    _, tan = jax.jvp(lambda x: call(a, x, b), [x], [jnp.ones(3)])
    np.testing.assert_allclose(tan[0], a, rtol=1e-6)
    np.testing.assert_allclose(tan[1], 0.0)
    pk.defjvp(op.primitive, None, lambda t, a, x, b, **kw: [2 * a * t, None], None)
    _, tan = jax.jvp(lambda x: call(a, x, b), [x], [jnp.ones(3)])
    np.testing.assert_allclose(tan[0], 2 * a, rtol=1e-6)
