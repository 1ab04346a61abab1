"""Port tests: general_batching_rule and defjvp used the way the reference's operators
use them. Everything below the import line is written against the reference API
(``XLACustomKernel`` passed to ``general_batching_rule`` from a custom batching rule,
plain JAX primitives built with ``jax.extend``/``jax.interpreters``); only the import
line names polykernel.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from polykernel import (
    KernelRegistrationError,
    XLACustomKernel,
    defjvp,
    general_batching_rule,
)

_ids = itertools.count()
RNG = np.random.default_rng(7)


def rand(*shape):
    return jnp.asarray(RNG.standard_normal(shape), dtype=jnp.float32)


# -- an operator in the reference's style: XLACustomKernel + its own batching rule ----
def make_weighted_sum():
    """out0 = w * x + b (per element), out1 = sum(x): three inputs, two outputs."""
    seen_axes = []
    prim = XLACustomKernel(f"ref.weighted_sum{next(_ids)}")

    def kernel_generator(outs, scale, **kwargs):
        def kernel(w, x, b):
            return scale * w * x + b, jnp.sum(x)

        return kernel

    prim.def_kernel("jax_raw", "cpu", kernel_generator)

    def batching(args, axes, **kwargs):
        seen_axes.append(tuple(axes))
        # The reference passes the XLACustomKernel itself (39 of 44 call sites).
        return general_batching_rule(prim, args, axes, **kwargs)

    prim.def_batching_rule(batching)

    def call(w, x, b, *, backend=None):
        return prim(
            w,
            x,
            b,
            outs=[
                jax.ShapeDtypeStruct(x.shape, x.dtype),
                jax.ShapeDtypeStruct((), x.dtype),
            ],
            scale=2.0,
            backend=backend,
        )

    return prim, call, seen_axes


def reference_weighted_sum(w, x, b):
    return [2.0 * w * x + b, jnp.sum(x)]


# Every mix of batched / unbatched operands, the batch at axis 0 or axis 1.
IN_AXES = [
    axes
    for axes in itertools.product([None, 0, 1], repeat=3)
    if any(a is not None for a in axes)
]


def batched_operand(axis, batch, n):
    return rand(n) if axis is None else rand(batch, n) if axis == 0 else rand(n, batch)


def take(a, axis, k):
    return a if axis is None else jnp.take(a, k, axis=axis)


@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
def test_general_batching_rule_with_a_kernel_at_every_mix(in_axes):
    _, call, seen = make_weighted_sum()
    batch, n = 3, 4
    args = [batched_operand(ax, batch, n) for ax in in_axes]
    got = jax.jit(jax.vmap(call, in_axes=in_axes))(*args)
    assert seen == [in_axes]
    for k in range(batch):
        want = reference_weighted_sum(
            *[take(a, ax, k) for a, ax in zip(args, in_axes, strict=True)]
        )
        np.testing.assert_allclose(got[0][k], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1][k], want[1], rtol=1e-5, atol=1e-6)


def test_general_batching_rule_with_a_kernel_and_nothing_batched():
    prim, _, _ = make_weighted_sum()
    w, x, b = rand(4), rand(4), rand(4)
    outs = (
        jax.ShapeDtypeStruct((4,), jnp.float32),
        jax.ShapeDtypeStruct((), jnp.float32),
    )
    got, dims = general_batching_rule(
        prim, [w, x, b], (None, None, None), outs=outs, scale=2.0, backend=None
    )
    assert list(dims) == [None, None]
    np.testing.assert_allclose(got[0], reference_weighted_sum(w, x, b)[0], rtol=1e-6)


def test_general_batching_rule_with_a_kernel_nested_vmap_and_grad_of_loss():
    _, call, _ = make_weighted_sum()
    w, b = rand(4), rand(4)
    xs = rand(2, 3, 4)
    got = jax.vmap(jax.vmap(lambda x: call(w, x, b)))(xs)
    np.testing.assert_allclose(got[0], 2.0 * w * xs + b, rtol=1e-5)
    np.testing.assert_allclose(got[1], jnp.sum(xs, axis=-1), rtol=1e-5)


# -- a plain single-result JAX primitive, as brainevent's older operators define ------
def make_single_result_primitive():
    """y = a * x + c as a plain Primitive with multiple_results=False."""
    prim = Primitive(f"ref_axpc{next(_ids)}")
    prim.def_impl(lambda a, x, c: a * x + c)
    prim.def_abstract_eval(lambda a, x, c: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(
        prim, mlir.lower_fun(lambda a, x, c: a * x + c, multiple_results=False)
    )
    batching.primitive_batchers[prim] = functools.partial(general_batching_rule, prim)
    return prim


@pytest.mark.parametrize("in_axes", IN_AXES, ids=str)
def test_general_batching_rule_single_result_primitive_every_mix(in_axes):
    prim = make_single_result_primitive()
    batch, n = 2, 5
    args = [batched_operand(ax, batch, n) for ax in in_axes]
    got = jax.vmap(prim.bind, in_axes=in_axes)(*args)
    assert got.shape == (batch, n)
    for k in range(batch):
        a, x, c = [take(v, ax, k) for v, ax in zip(args, in_axes, strict=True)]
        np.testing.assert_allclose(got[k], a * x + c, rtol=1e-5, atol=1e-6)


def test_single_result_primitive_nothing_batched_gives_one_none():
    # The reference returns out_dim None (not a list the length of the array).
    prim = make_single_result_primitive()
    a, x, c = rand(3), rand(3), rand(3)
    out, dims = general_batching_rule(prim, [a, x, c], [None, None, None])
    assert dims is None
    np.testing.assert_allclose(out, a * x + c, rtol=1e-6)
    out, dims = general_batching_rule(prim, [a, rand(2, 3), c], [None, 0, None])
    assert dims == 0 and out.shape == (2, 3)


def test_general_batching_rule_rejects_what_it_cannot_bind():
    with pytest.raises(TypeError, match="prim must be a JAX Primitive, an XLACu"):
        general_batching_rule(42, [jnp.ones(2)], [0])
    prim = make_single_result_primitive()
    with pytest.raises(ValueError, match=r"got 2 operand\(s\) but 1 batch axes"):
        general_batching_rule(prim, [jnp.ones(2), jnp.ones(2)], [0])


# -- defjvp on plain primitives (the reference's util.defjvp) -------------------------
def finite_difference(f, primals, tangents, eps=1e-3):
    plus = f(*[p + eps * t for p, t in zip(primals, tangents, strict=True)])
    minus = f(*[p - eps * t for p, t in zip(primals, tangents, strict=True)])
    return jax.tree.map(lambda a, b: (a - b) / (2 * eps), plus, minus)


def test_defjvp_single_result_primitive_jvp_and_jacfwd():
    prim = make_single_result_primitive()
    defjvp(
        prim,
        lambda ta, a, x, c: ta * x,
        lambda tx, a, x, c: a * tx,
        lambda tc, a, x, c: tc,
    )
    primals = [rand(4), rand(4), rand(4)]
    tangents = [rand(4), rand(4), rand(4)]
    out, tan = jax.jvp(prim.bind, primals, tangents)
    np.testing.assert_allclose(out, primals[0] * primals[1] + primals[2], rtol=1e-6)
    fd = finite_difference(lambda a, x, c: a * x + c, primals, tangents)
    np.testing.assert_allclose(tan, fd, rtol=2e-2, atol=2e-3)
    a, x, c = primals
    jac = jax.jacfwd(lambda x: prim.bind(a, x, c))(x)
    np.testing.assert_allclose(jac, jnp.diag(a), rtol=1e-6)
    jac_fd = np.stack(
        [
            finite_difference(lambda x: a * x + c, [x], [e])
            for e in np.eye(4, dtype=np.float32)
        ],
        axis=1,
    )
    np.testing.assert_allclose(jac, jac_fd, rtol=2e-2, atol=2e-3)


def make_multi_result_primitive():
    """(x * y, x + y) as a plain multiple-result Primitive: no `outs` parameter."""
    prim = Primitive(f"ref_prod_sum{next(_ids)}")
    prim.multiple_results = True

    def compute(x, y):
        return [x * y, x + y]

    prim.def_impl(compute)
    prim.def_abstract_eval(lambda x, y: [jax.core.ShapedArray(x.shape, x.dtype)] * 2)
    mlir.register_lowering(prim, mlir.lower_fun(compute, multiple_results=True))
    batching.primitive_batchers[prim] = functools.partial(general_batching_rule, prim)
    return prim


def test_defjvp_multiple_result_plain_primitive_jvp_and_jacfwd():
    prim = make_multi_result_primitive()
    defjvp(prim, lambda tx, x, y: [tx * y, tx], lambda ty, x, y: [x * ty, ty])
    primals, tangents = [rand(3), rand(3)], [rand(3), rand(3)]
    out, tan = jax.jvp(lambda x, y: prim.bind(x, y), primals, tangents)
    np.testing.assert_allclose(out[0], primals[0] * primals[1], rtol=1e-6)
    fd = finite_difference(lambda x, y: [x * y, x + y], primals, tangents)
    for k in range(2):
        np.testing.assert_allclose(tan[k], fd[k], rtol=2e-2, atol=2e-3)
    x, y = primals
    jac = jax.jacfwd(lambda x: prim.bind(x, y)[0])(x)
    np.testing.assert_allclose(jac, jnp.diag(y), rtol=1e-6)
    # Only y varies and its rule is None: zero tangents of the right avals.
    defjvp(prim, lambda tx, x, y: [tx * y, tx], None)
    _, tan = jax.jvp(lambda y: prim.bind(x, y), [y], [jnp.ones(3)])
    assert [t.shape for t in tan] == [(3,), (3,)]
    np.testing.assert_allclose(tan[0], 0.0)


def test_defjvp_arity_is_checked():
    prim = make_single_result_primitive()
    defjvp(prim, lambda ta, a, x, c: ta * x, None)
    with pytest.raises(
        KernelRegistrationError,
        match=r"2 JVP rule\(s\) were given but the primitive was called with 3",
    ):
        jax.jvp(prim.bind, [rand(2), rand(2), rand(2)], [rand(2)] * 3)


def test_defjvp_multi_result_rule_returning_a_bare_array_is_a_type_error():
    prim = make_multi_result_primitive()
    defjvp(prim, lambda tx, x, y: tx * y, None)
    with pytest.raises(TypeError, match="expected a list of 2 tangents"):
        jax.jvp(lambda x: prim.bind(x, jnp.ones(2)), [rand(2)], [rand(2)])


def test_defjvp_rejects_non_primitives_and_non_callable_rules():
    for caught in (TypeError, AssertionError):
        with pytest.raises(caught, match="expected a JAX Primitive or an XLACustom"):
            defjvp(object(), None)
    prim = make_single_result_primitive()
    with pytest.raises(TypeError, match=r"rule 1 must be callable or None \(got int"):
        defjvp(prim, None, 3, None)


def test_defjvp_on_kernel_still_jvps_with_ad_zeros():
    prim, call, _ = make_weighted_sum()
    defjvp(
        prim,
        lambda tw, w, x, b, **kw: [kw["scale"] * tw * x, None],
        lambda tx, w, x, b, **kw: [kw["scale"] * w * tx, jnp.sum(tx)],
        None,
    )
    w, x, b = rand(3), rand(3), rand(3)
    _, tan = jax.jvp(lambda x: call(w, x, b), [x], [jnp.ones(3)])
    np.testing.assert_allclose(tan[0], 2.0 * w, rtol=1e-6)
    np.testing.assert_allclose(tan[1], 3.0, rtol=1e-6)
    _, tan = jax.jvp(lambda b: call(w, x, b), [b], [jnp.ones(3)])
    assert type(tan[0]) is not ad.Zero
    np.testing.assert_allclose(tan[0], 0.0)
