"""``numba_cuda_callable``: simulated on the CPU; its Python GPU handler decoded here.

The GPU handler is the one Numba-CUDA path that runs Python per call (the wrapped
function is arbitrary Python). Its frame decoding, metadata answer and error path
run here on a hand-built call frame; the launch itself is a ``gpu`` test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cuda_kernels import double
from ffi_frames import call_handler
from numba import cuda

import polykernel as pk
from polykernel.backends.numba_cuda.host_handler import (
    DeviceBuffer,
    make_host_handler,
)
from polykernel.errors import KernelTypeError
from polykernel.ffi import abi
from polykernel.ffi.metadata import query_metadata

F32 = jnp.float32


@cuda.jit
def shift(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += 1


def two_steps(x, out, stream):
    double[1, 8, stream](x, out)
    shift[1, 8, stream](out)


def with_temporary(x, out, stream):
    tmp = cuda.device_array_like(x)  # the simulator's, on the CPU
    double[1, 8, stream](x, tmp)
    double[1, 8, stream](tmp, out)


def test_several_launches_on_the_stream():
    f = pk.numba_cuda_callable(two_steps, jax.ShapeDtypeStruct((5,), F32))
    x = jnp.arange(5, dtype=F32)
    np.testing.assert_array_equal(f(x), 2 * np.arange(5) + 1)
    np.testing.assert_array_equal(jax.jit(f)(x), 2 * np.arange(5) + 1)


def test_temporaries_come_from_the_simulated_cuda_module():
    f = pk.numba_cuda_callable(with_temporary, [jax.ShapeDtypeStruct((3,), F32)])
    (y,) = f(jnp.ones(3, F32))
    np.testing.assert_array_equal(y, [4, 4, 4])
    assert globals()["cuda"] is cuda and type(double).__name__ == "CUDADispatcher"


def test_aliasing_and_vmap():
    f = pk.numba_cuda_callable(
        lambda x, out, stream: shift[1, 8, stream](out),
        jax.ShapeDtypeStruct((3,), F32),
        input_output_aliases={0: 0},
        vmap_method="sequential",
    )
    np.testing.assert_array_equal(f(jnp.zeros(3, F32)), [1, 1, 1])
    xs = jnp.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(jax.vmap(f)(xs), np.asarray(xs) + 1)


def test_a_non_callable_is_refused():
    with pytest.raises(KernelTypeError, match="func must be a Python function"):
        pk.numba_cuda_callable(3, jax.ShapeDtypeStruct((1,), F32))


def test_signature_matches_the_reference():
    import inspect

    sig = inspect.signature(pk.numba_cuda_callable)
    assert list(sig.parameters) == ["func", "outs", "vmap_method",
                                    "input_output_aliases"]  # fmt: skip
    assert sig.parameters["vmap_method"].kind is inspect.Parameter.KEYWORD_ONLY


def test_host_handler_answers_metadata_without_the_cuda_graph_trait():
    handler = make_host_handler("t_meta", lambda ins, outs, stream: None)
    meta = query_metadata(handler.address)
    assert meta.api_version == abi.installed_api_version()
    assert not meta.command_buffer_compatible


def test_host_handler_decodes_buffers_and_the_stream():
    seen = []
    handler = make_host_handler("t_decode", lambda *a: seen.append(a))
    f32 = abi.DTYPE_CODES["float32"]
    i32 = abi.DTYPE_CODES["int32"]
    buffers = [(f32, (2, 3), 0x1000), (i32, (), 0x2000), (f32, (4,), 0x3000)]
    assert call_handler(handler.address, buffers, {}, n_in=2) is None
    (ins, outs, stream), = seen  # fmt: skip
    assert ins == [DeviceBuffer("float32", (2, 3), 0x1000),
                   DeviceBuffer("int32", (), 0x2000)]  # fmt: skip
    assert outs == [DeviceBuffer("float32", (4,), 0x3000)] and stream == 0x5EED


def test_host_handler_turns_exceptions_into_ffi_errors():
    def boom(ins, outs, stream):
        raise ValueError("bad input")

    handler = make_host_handler("t_boom", boom)
    f32 = abi.DTYPE_CODES["float32"]
    message = call_handler(handler.address, [(f32, (1,), 0)], {}, n_in=0)
    assert message == "t_boom: the function raised ValueError: bad input"
