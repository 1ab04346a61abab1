"""XLACustomKernel: names, registration, defaults, call and benchmark functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from primitive_support import new_op, scale_gen

import polykernel as pk


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
