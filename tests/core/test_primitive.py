"""XLACustomKernel: registration, defaults, calling conventions and their errors."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk

_ids = itertools.count()


def new_op(prefix: str = "op") -> pk.XLACustomKernel:
    return pk.XLACustomKernel(f"test.primitive.{prefix}{next(_ids)}")


def scale_gen(factor: float):
    def generator(outs, **kwargs):
        return lambda x: x * factor

    return generator


SPEC = jax.ShapeDtypeStruct((4,), jnp.float32)


def test_name_primitive_and_repr():
    op = new_op("named")
    assert op.name.startswith("test.primitive.named")
    assert op.primitive.name == op.name
    assert op.primitive.multiple_results
    assert "XLACustomKernel" in repr(op)


def test_name_must_be_nonempty_string():
    with pytest.raises(pk.KernelRegistrationError, match="name must be a non-empty"):
        pk.XLACustomKernel("")
    with pytest.raises(TypeError, match=r"name must be a string \(got int: 3\)"):
        pk.XLACustomKernel(3)


def test_first_registered_backend_is_default_and_asdefault_overrides():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    op.def_kernel("other", "cpu", scale_gen(2.0))
    assert op.get_default("cpu") == "jax_raw"
    op.def_kernel("third", "cpu", scale_gen(3.0), asdefault=True)
    assert op.get_default("cpu") == "third"
    assert op.available_backends("cpu") == ["jax_raw", "other", "third"]
    assert op.available_backends("tpu") == []
    assert op.get_default("gpu") is None


def test_defaults_is_a_copy():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    snapshot = op.defaults
    snapshot["cpu"] = "tampered"
    assert op.defaults == {"cpu": "jax_raw"}


def test_shorthand_methods_register_backend_and_platform():
    op = new_op()
    gen = scale_gen(1.0)
    op.def_numba_kernel(gen)
    op.def_numba_cuda_kernel(gen)
    op.def_warp_kernel(gen)
    op.def_triton_kernel(gen)
    op.def_pallas_kernel("gpu", gen)
    op.def_pallas_kernel("tpu", gen)
    op.def_cuda_raw_kernel(gen)
    op.def_cuda_raw_kernel(gen, platform="cpu")
    op.def_jax_raw_kernel(gen)
    assert op.available_backends("cpu") == ["numba", "cuda_raw", "jax_raw"]
    assert op.available_backends("gpu") == [
        "numba_cuda",
        "warp",
        "triton",
        "pallas",
        "cuda_raw",
        "jax_raw",
    ]
    assert op.available_backends("tpu") == ["pallas", "jax_raw"]
    assert op.defaults == {"cpu": "numba", "gpu": "numba_cuda", "tpu": "pallas"}


def test_shorthand_asdefault():
    op = new_op()
    op.def_kernel("jax_raw", "gpu", scale_gen(1.0))
    op.def_warp_kernel(scale_gen(1.0), asdefault=True)
    assert op.get_default("gpu") == "warp"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda op: op.def_kernel("", "cpu", scale_gen(1)),
            pk.KernelRegistrationError,
            "backend must be a non-empty string",
        ),
        (
            lambda op: op.def_kernel(3, "cpu", scale_gen(1)),
            pk.KernelTypeError,
            r"backend must be a string such as 'numba' \(got int: 3\)",
        ),
        (
            lambda op: op.def_kernel("x", "mars", scale_gen(1)),
            pk.KernelRegistrationError,
            "platform must be one of",
        ),
        (
            lambda op: op.def_kernel("x", None, scale_gen(1)),
            pk.KernelTypeError,
            r"platform must be a string, one of \['cpu', 'gpu', 'tpu'\] \(got "
            r"NoneType",
        ),
        (
            lambda op: op.def_kernel("x", "cpu", 3),
            pk.KernelTypeError,
            r"kernel generator must be callable \(got int\)",
        ),
        (
            lambda op: op.def_pallas_kernel("rocm", scale_gen(1)),
            pk.UnsupportedPlatformError,
            r"def_pallas_kernel\(\): platform must be one of \['gpu', 'tpu', 'cpu'\] "
            r"\(got 'rocm'\)",
        ),
        (
            lambda op: op.def_cuda_raw_kernel(scale_gen(1), platform="tpu"),
            pk.KernelRegistrationError,
            r"\['cpu', 'gpu'\]",
        ),
        (
            lambda op: op.def_tags("ok", ""),
            pk.KernelRegistrationError,
            "tags must be non-empty strings",
        ),
        (
            lambda op: op.def_tags("ok", 3),
            pk.KernelTypeError,
            r"tags must be strings \(got int: 3\)",
        ),
    ],
)
def test_registration_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(new_op())


NOT_CALLABLE = [3, "kernel", None, [lambda outs: None]]
SHORTHANDS = [
    lambda op, kg: op.def_kernel("x", "cpu", kg),
    lambda op, kg: op.def_numba_kernel(kg),
    lambda op, kg: op.def_numba_cuda_kernel(kg),
    lambda op, kg: op.def_warp_kernel(kg),
    lambda op, kg: op.def_triton_kernel(kg),
    lambda op, kg: op.def_pallas_kernel("gpu", kg),
    lambda op, kg: op.def_pallas_kernel("tpu", kg),
    lambda op, kg: op.def_cuda_raw_kernel(kg),
    lambda op, kg: op.def_cuda_raw_kernel(kg, platform="cpu"),
    lambda op, kg: op.def_jax_raw_kernel(kg),
    lambda op, kg: op.def_jax_raw_kernel(kg, platform="tpu"),
]


@pytest.mark.parametrize("kg", NOT_CALLABLE, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("register", SHORTHANDS)
def test_non_callable_generator_is_a_type_error_everywhere(register, kg):
    # TypeError by Python's convention (issue 11); AssertionError as the seed says.
    for caught in (TypeError, AssertionError, pk.KernelError):
        op = new_op()
        with pytest.raises(caught, match="the kernel generator must be callable"):
            register(op, kg)
        assert op.defaults == {}


def test_set_default_errors_list_what_is_registered():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(1.0))
    with pytest.raises(
        ValueError,
        match=r"no kernels are registered for platform "
        r"'gpu' \(platforms with kernels: \['cpu'\]\)",
    ):
        op.set_default("gpu", "warp")
    with pytest.raises(
        ValueError,
        match=r"backend 'warp' is not registered for "
        r"platform 'cpu' \(registered: \['jax_raw'\]\)",
    ):
        op.set_default("cpu", "warp")


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


def test_def_call_and_call():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(2.0))
    assert op.call_function is None
    with pytest.raises(ValueError, match="no call function is registered"):
        op.call(jnp.ones(4))

    def call_fn(x, *, backend=None):
        return op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend)

    op.def_call(call_fn)
    assert op.call_function is call_fn
    np.testing.assert_allclose(op.call(jnp.ones(4, jnp.float32)), 2.0)


def test_def_tags_replaces():
    op = new_op()
    op.def_tags("csr", "float")
    op.def_tags("binary")
    assert op.tags == ("binary",)


def test_def_benchmark_data_is_stored_and_required_by_benchmark():
    op = new_op()
    op.def_kernel("jax_raw", "cpu", scale_gen(2.0))
    with pytest.raises(pk.BenchmarkDataFnNotProvidedError, match="def_benchmark_data"):
        op.benchmark(platform="cpu")

    def data(*, platform):
        return []

    op.def_benchmark_data(data)
    assert op.benchmark_data_function is data


def test_every_primitive_is_registered():
    from polykernel.core import registry

    op = new_op()
    assert registry.get_registry()[op.name] is op
