"""Calling an XLACustomKernel: outs, keywords, per-call and default backends, jit,
lowering and the errors of kernels that fail to build or run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from primitive_support import SPEC, new_op, scale_gen

import polykernel as pk


def test_call_single_struct_returns_one_array():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(2.0))
    out = op(jnp.arange(4.0, dtype=jnp.float32), outs=SPEC)
    np.testing.assert_allclose(out, [0, 2, 4, 6])


@pytest.mark.parametrize("container", [list, tuple])
def test_call_sequence_outs_mirror_container(container):
    op = new_op()
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: (x + 1, x * 2))
    out = op(jnp.ones(4, jnp.float32), outs=container([SPEC, SPEC]))
    assert type(out) is container
    np.testing.assert_allclose(out[0], 2.0)
    np.testing.assert_allclose(out[1], 2.0)


def test_call_pytree_outs_mirror_structure():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: [x + 1, x.sum()])
    out = op(
        jnp.ones(4, jnp.float32),
        outs={"a": SPEC, "b": jax.ShapeDtypeStruct((), jnp.float32)},
    )
    assert set(out) == {"a", "b"}
    assert out["b"].shape == ()
    np.testing.assert_allclose(out["b"], 4.0)


def test_call_accepts_numpy_and_python_inputs():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x, y: x + y)
    out = op(np.ones(4, np.float32), np.float32(2.0), outs=SPEC)
    np.testing.assert_allclose(out, 3.0)


def test_outs_errors():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    with pytest.raises(pk.KernelRegistrationError, match="non-empty list/tuple"):
        op(jnp.ones(4), outs=[])
    with pytest.raises(pk.KernelTypeError, match=r"outs\[1\] must have .shape"):
        op(jnp.ones(4), outs=[SPEC, 3])


def test_unhashable_keyword_names_the_keyword():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    with pytest.raises(
        pk.KernelTypeError, match="keyword argument 'weights' must be hashable"
    ):
        op(jnp.ones(4), outs=SPEC, weights=[1, 2])


def test_reserved_keyword_is_rejected():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    with pytest.raises(pk.KernelRegistrationError, match="keyword 'ins' is reserved"):
        op(jnp.ones(4), outs=SPEC, ins=1)


def test_keywords_reach_the_generator():
    op = new_op()
    seen = {}

    def generator(outs, factor, mode):
        seen.update(factor=factor, mode=mode, outs=outs)
        return lambda x: x * factor

    op.def_kernel("jax_raw", "cpu", generator)
    out = op(jnp.ones(4, jnp.float32), outs=SPEC, factor=3.0, mode="fast")
    np.testing.assert_allclose(out, 3.0)
    assert seen["mode"] == "fast"
    assert seen["outs"][0].shape == (4,)


def test_generator_receives_ins_only_when_declared():
    op = new_op()
    seen = []

    def with_ins(outs, ins, **kwargs):
        seen.append(tuple((a.shape, a.dtype) for a in ins))
        return lambda x, y: x + y

    op.def_kernel("jax_raw", "cpu", with_ins)
    op(jnp.ones(4, jnp.float32), jnp.ones(4, jnp.float32), outs=SPEC)
    assert seen == [(((4,), jnp.float32), ((4,), jnp.float32))]

    op2 = new_op()
    op2.def_kernel("jax_raw", "cpu", lambda outs, **kwargs: lambda x: x + len(kwargs))
    np.testing.assert_allclose(op2(jnp.zeros(4, jnp.float32), outs=SPEC), 0.0)


def test_per_call_backend_wins_over_default():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    op.def_kernel("double", "cpu", scale_gen(2.0))
    x = jnp.ones(4, jnp.float32)
    np.testing.assert_allclose(op(x, outs=SPEC), 1.0)
    np.testing.assert_allclose(op(x, outs=SPEC, backend="double"), 2.0)


def test_unknown_per_call_backend():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    for caught in (ValueError, pk.KernelFallbackExhaustedError):
        with pytest.raises(caught, match="backend 'nope' is not registered on any"):
            op(jnp.ones(4), outs=SPEC, backend="nope")
    with pytest.raises(TypeError, match=r"backend must be a string or None \(got int"):
        op(jnp.ones(4), outs=SPEC, backend=3)


def test_per_call_backend_registered_only_on_other_platform():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    op.def_warp_kernel(scale_gen(1.0))
    for caught in (pk.UnknownBackendError, pk.KernelFallbackExhaustedError, ValueError):
        with pytest.raises(
            caught, match=r"backend 'warp' is not registered for platform 'cpu'"
        ):
            op(jnp.ones(4), outs=SPEC, backend="warp")


def test_changed_default_reaches_already_jitted_functions():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    op.def_kernel("double", "cpu", scale_gen(2.0))
    f = jax.jit(lambda x: op(x, outs=SPEC))
    x = jnp.ones(4, jnp.float32)
    np.testing.assert_allclose(f(x), 1.0)
    op.set_default("cpu", "double")
    np.testing.assert_allclose(f(x), 2.0)
    np.testing.assert_allclose(op(x, outs=SPEC), 2.0)
    op.set_default("cpu", "jax_raw")
    np.testing.assert_allclose(f(x), 1.0)


def test_asdefault_registration_reaches_already_jitted_functions():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    f = jax.jit(lambda x: op(x, outs=SPEC))
    x = jnp.ones(4, jnp.float32)
    np.testing.assert_allclose(f(x), 1.0)
    op.def_kernel("triple", "cpu", scale_gen(3.0), asdefault=True)
    np.testing.assert_allclose(f(x), 3.0)


def test_jit_matches_eager():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x, y: (jnp.sin(x) * y,))
    x = jnp.linspace(0, 1, 4, dtype=jnp.float32)
    y = jnp.arange(4, dtype=jnp.float32)
    eager = op(x, y, outs=[SPEC])[0]
    jitted = jax.jit(lambda a, b: op(a, b, outs=[SPEC])[0])(x, y)
    np.testing.assert_allclose(eager, jitted, rtol=1e-6)
    np.testing.assert_allclose(eager, np.sin(x) * y, rtol=1e-6)


def test_no_kernel_for_platform_lists_platforms_with_kernels():
    op = new_op()
    op.def_warp_kernel(scale_gen(1.0))
    # The reference raises KernelFallbackExhaustedError here; so do we.
    with pytest.raises(
        pk.KernelFallbackExhaustedError,
        match=r"no kernel for platform 'cpu' \(platforms with kernels: "
        r"\['gpu'\]\)",
    ):
        op(jnp.ones(4, jnp.float32), outs=SPEC)


def test_lowering_for_gpu_uses_gpu_kernel_without_a_device():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    op.def_kernel("jax_raw", "gpu", scale_gen(5.0))
    f = jax.jit(lambda x: op(x, outs=SPEC))
    text = (
        f.trace(jnp.ones(4, jnp.float32)).lower(lowering_platforms=("cuda",)).as_text()
    )
    assert "5.0" in text or "5.000000e+00" in text


def test_generator_failure_names_primitive_backend_platform_and_alternatives():
    op = new_op("failing")

    def broken(outs, **kwargs):
        raise RuntimeError("kaboom")

    op.def_kernel("numba", "cpu", broken)
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    with pytest.raises(pk.KernelCompilationError) as info:
        op(jnp.ones(4, jnp.float32), outs=SPEC)
    message = str(info.value)
    assert op.name in message
    assert "'numba' kernel for platform 'cpu'" in message
    assert "RuntimeError: kaboom" in message
    assert "['jax_raw']" in message
    assert "set_default('cpu', 'jax_raw')" in message
    assert "polykernel.set_backend('cpu', 'jax_raw') for every primitive" in message
    assert "backend='jax_raw'" in message


def test_generator_failure_with_no_alternative():
    op = new_op()
    op.def_kernel("numba", "cpu", lambda outs, **kw: 42)
    with pytest.raises(
        pk.KernelCompilationError,
        match=r"returned int, expected a callable.*No other backend",
    ):
        op(jnp.ones(4, jnp.float32), outs=SPEC)


def test_kernel_returning_wrong_number_of_outputs():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: (x, x))
    with pytest.raises(
        pk.KernelCompilationError, match=r"returned 2 array\(s\), expected 1"
    ):
        op(jnp.ones(4, jnp.float32), outs=SPEC)
