"""``numba_cuda_kernel`` on the CPU: Numba's CUDA simulator runs the real kernel.

Grid/block arithmetic, ``launch_dims``, several outputs, aliasing, shared memory,
device functions and ``vmap`` are executed here (tiny cases: the simulator runs one
Python thread per CUDA thread). The GPU path is compiled in
``test_numba_cuda_compile.py`` and launched only by its ``gpu`` tests.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numba import cuda, float32

import polykernel as pk
from polykernel.errors import KernelRegistrationError, KernelTypeError

F32 = jnp.float32


@cuda.jit
def add(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit(device=True)
def square(v):
    return v * v


@cuda.jit
def sum_and_square(x, total, squares):
    i = cuda.grid(1)
    if i < x.size:
        squares[i] = square(x[i])
        cuda.atomic.add(total, 0, x[i])


@cuda.jit
def transpose(x, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[j, i]


@cuda.jit
def scale_in_place(x, factor, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * factor[0]  # x *is* out when they alias


@cuda.jit
def reverse_block(x, out):
    tile = cuda.shared.array(0, dtype=float32)  # dynamic shared memory
    t = cuda.threadIdx.x
    tile[t] = x[t]
    cuda.syncthreads()
    out[t] = tile[cuda.blockDim.x - 1 - t]


def _x(n=6):
    return jnp.arange(n, dtype=F32)


def test_eager_and_jit_with_grid_and_block():
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((6,), F32), grid=2, block=4)
    np.testing.assert_array_equal(f(_x(), _x()), 2 * np.arange(6))
    np.testing.assert_array_equal(jax.jit(f)(_x(), 1 + _x()), 2 * np.arange(6) + 1)


def test_launch_dims_covers_every_element_and_short_grids_do_not():
    out = jax.ShapeDtypeStruct((6,), F32)
    full = pk.numba_cuda_kernel(add, out, launch_dims=6, threads_per_block=4)
    np.testing.assert_array_equal(full(_x(), _x()), 2 * np.arange(6))
    short = pk.numba_cuda_kernel(add, out, grid=1, block=4)  # 4 threads for 6
    np.testing.assert_array_equal(short(_x(), _x()), [0, 2, 4, 6, 0, 0])


def test_two_dimensional_grid():
    x = jnp.arange(6, dtype=F32).reshape(2, 3)
    f = pk.numba_cuda_kernel(transpose, jax.ShapeDtypeStruct((3, 2), F32),
                             grid=(2, 1), block=(2, 2))  # fmt: skip
    np.testing.assert_array_equal(f(x), np.asarray(x).T)


def test_several_outputs_keep_the_structure_of_outs_and_device_functions_run():
    outs = (jax.ShapeDtypeStruct((1,), F32), jax.ShapeDtypeStruct((5,), F32))
    f = pk.numba_cuda_kernel(sum_and_square, outs, launch_dims=5, threads_per_block=8)
    total, squares = jax.jit(f)(_x(5))
    np.testing.assert_array_equal(total, [10.0])
    np.testing.assert_array_equal(squares, np.arange(5) ** 2)
    as_list = pk.numba_cuda_kernel(sum_and_square, list(outs), launch_dims=5)
    assert isinstance(as_list(_x(5)), list)


def test_input_output_aliases_make_the_kernel_work_in_place():
    f = pk.numba_cuda_kernel(scale_in_place, jax.ShapeDtypeStruct((4,), F32),
                             launch_dims=4, threads_per_block=4,
                             input_output_aliases={0: 0})  # fmt: skip
    y = jax.jit(f)(_x(4), jnp.array([3.0], F32))
    np.testing.assert_array_equal(y, 3 * np.arange(4))


def test_dynamic_shared_memory_and_syncthreads():
    f = pk.numba_cuda_kernel(reverse_block, jax.ShapeDtypeStruct((4,), F32),
                             grid=1, block=4, shared_mem=16)  # fmt: skip
    np.testing.assert_array_equal(f(_x(4)), [3, 2, 1, 0])


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_gives_the_loop_result(method):
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((4,), F32), launch_dims=4,
                             threads_per_block=4, vmap_method=method)  # fmt: skip
    xs = jnp.arange(8, dtype=F32).reshape(2, 4)
    got = jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, _x(4))
    np.testing.assert_array_equal(got, np.asarray(xs) + np.arange(4))


def test_vmap_without_a_vmap_method_uses_the_default_of_every_wrapper():
    # vmap_method=None means "expand_dims" for every polykernel kernel wrapper
    # (it was a NotImplementedError under vmap before the backends shared one
    # contract): the kernel runs once per batch element.
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((4,), F32), launch_dims=4)
    assert f.vmap_method == "expand_dims"
    x, y = jnp.arange(8, dtype=F32).reshape(2, 4), jnp.ones((2, 4), F32)
    np.testing.assert_array_equal(jax.vmap(f)(x, y), x + y)


def test_an_empty_grid_launches_nothing():
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((0,), F32), launch_dims=0)
    assert f(_x(0), _x(0)).shape == (0,)


def test_real_numba_cuda_is_untouched_by_the_simulator():
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((2,), F32), launch_dims=2)
    f(_x(2), _x(2))
    assert type(add).__name__ == "CUDADispatcher" and add.__module__ == __name__
    assert cuda.jit.__module__.startswith("numba.cuda.decorators")
    assert globals()["square"] is square and type(square).__name__ == "CUDADispatcher"


def test_signature_matches_the_reference():
    import inspect

    sig = inspect.signature(pk.numba_cuda_kernel)
    defaults = {
        name: p.default
        for name, p in sig.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert list(sig.parameters)[:2] == ["kernel", "outs"]
    assert defaults == {"grid": None, "block": None, "launch_dims": None,
                        "threads_per_block": 256, "shared_mem": 0,
                        "vmap_method": None, "input_output_aliases": None}  # fmt: skip


def _plain(x, out):
    out[0] = x[0]


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (_plain, "kernel must be a Numba CUDA kernel .*@numba.cuda.jit.*got "
         "builtins.function"),
        (square, "'square' is a device function"),
    ],
)  # fmt: skip
def test_a_non_kernel_is_a_type_error_and_an_assertion_error(kernel, message):
    with pytest.raises(KernelTypeError, match=message) as info:
        pk.numba_cuda_kernel(kernel, jax.ShapeDtypeStruct((1,), F32), launch_dims=1)
    assert isinstance(info.value, TypeError) and isinstance(info.value, AssertionError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "numba_cuda_kernel 'add': no launch configuration .*give grid and "
         "block together .*or launch_dims alone"),
        ({"grid": 1, "block": 1, "launch_dims": 1}, "cannot be combined"),
        ({"launch_dims": 1, "vmap_method": "magic"}, "vmap_method must be one of"),
        ({"launch_dims": 1, "input_output_aliases": {0: 3}}, "maps input 0 to "
         "output 3, but there are 1 outputs"),
        ({"launch_dims": 1, "shared_mem": -1}, r"shared_mem must be an int in \[0, "),
        ({"launch_dims": 1, "shared_mem": 1.5}, r"shared_mem must be an int in \[0, "),
        ({"grid": 1, "block": 1, "vmap_method": "expand_dims"},
         r"vmap_method='expand_dims' cannot be combined with an explicit grid/block, "
         r"which is sized for one unbatched call\. Pass launch_dims=\.\.\. instead"),
    ],
)  # fmt: skip
def test_bad_options_are_value_errors(kwargs, message):
    with pytest.raises(KernelRegistrationError, match=message) as info:
        pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((1,), F32), **kwargs)
    assert isinstance(info.value, ValueError)


def test_launch_configuration_errors_come_before_the_kernel_type_as_the_reference():
    for kwargs in ({}, {"grid": 1, "block": 1, "vmap_method": "sequential"}):
        with pytest.raises(KernelRegistrationError, match="numba_cuda_kernel '_plain'"):
            pk.numba_cuda_kernel(_plain, jax.ShapeDtypeStruct((1,), F32), **kwargs)


def test_bfloat16_is_refused_when_wrapping_and_at_call_as_value_and_type_error():
    bf16 = jax.ShapeDtypeStruct((2,), jnp.bfloat16)
    with pytest.raises(pk.UnsupportedDtypeError, match=r"numba_cuda_kernel 'add': "
                       r"outs\[1\] has dtype bfloat16, which the numba_cuda backend "
                       r"cannot take; it takes bool, .*float16, float32"
                       ) as info:  # fmt: skip
        pk.numba_cuda_kernel(add, [jax.ShapeDtypeStruct((2,), F32), bf16],
                             launch_dims=2)  # fmt: skip
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((2,), F32), launch_dims=2)
    with pytest.raises(ValueError, match=r"'add': input 1 has dtype bfloat16, which "
                       r"the numba_cuda backend cannot take"):
        f(_x(2), jnp.ones(2, jnp.bfloat16))


def test_an_alias_naming_a_missing_input_is_refused_at_the_call_not_in_a_callback():
    f = pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((2,), F32), launch_dims=2,
                             input_output_aliases={5: 0})  # fmt: skip
    with pytest.raises(KernelRegistrationError, match=r"'add': input_output_aliases "
                       r"names input 5, but the call has 2 inputs \(indices 0 to 1\)"):
        jax.jit(f)(_x(2), _x(2))


def test_a_malformed_alias_mapping_is_a_type_error_like_every_wrapper():
    with pytest.raises(TypeError, match="input_output_aliases must be a dict"):
        pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((1,), F32), launch_dims=1,
                             input_output_aliases=[0])  # fmt: skip


def test_bad_outs_are_refused():
    with pytest.raises(ValueError, match=r"outs must be a jax\.ShapeDtypeStruct"):
        pk.numba_cuda_kernel(add, [], launch_dims=1)


def test_missing_numba_cuda_names_the_extra(monkeypatch):
    import numba

    monkeypatch.delattr(numba, "cuda", raising=False)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    with pytest.raises(ImportError, match=r"pip install 'polykernel\[numba-cuda\]'"):
        pk.numba_cuda_kernel(add, jax.ShapeDtypeStruct((1,), F32), launch_dims=1)


def test_a_kernel_defined_in_a_function_runs_on_the_simulator():
    # `numba.cuda` and the device function live in the kernel's closure, not in its
    # module's globals: the simulator must see them there too.
    def make(n):
        from numba import cuda as local_cuda

        @local_cuda.jit(device=True)
        def twice(v):
            return 2 * v

        @local_cuda.jit
        def strided(x, out):
            i, step = local_cuda.grid(1), local_cuda.gridsize(1)
            for k in range(2):
                j = i + k * step
                if j < out.size:
                    out[j] = twice(x[j])

        spec = jax.ShapeDtypeStruct((n,), jnp.float32)
        return pk.numba_cuda_kernel(strided, spec, launch_dims=(n + 1) // 2)

    x = jnp.arange(9, dtype=jnp.float32)
    np.testing.assert_array_equal(make(9)(x), 2 * np.asarray(x))


@cuda.jit
def scaled(x, out, alpha, n, flag):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * x[i] + n + (1.0 if flag else 0.0)


def test_scalar_parameters_are_keywords_of_the_call():
    f = pk.numba_cuda_kernel(scaled, jax.ShapeDtypeStruct((4,), F32), launch_dims=4)
    x = _x(4)
    np.testing.assert_allclose(f(x, alpha=2.5, n=3, flag=True), 2.5 * x + 4)
    np.testing.assert_allclose(jax.jit(lambda v: f(v, alpha=-1.0, n=0, flag=False))(x),
                               -x)  # fmt: skip
    with pytest.raises(pk.KernelCallError, match=r"numba_cuda_kernel 'scaled': "
                       r"missing keyword argument 'flag' \(x, out take the call's 2 "
                       r"arrays; parameters: alpha: inferred, n: inferred, flag: "
                       r"inferred\)"):  # fmt: skip
        f(x, alpha=1.0, n=1)
