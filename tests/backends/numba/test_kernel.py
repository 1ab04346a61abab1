"""numba_kernel: eager, jit, outputs, dtypes, ranks, attributes, aliases, errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numba
import numpy as np
import pytest

import polykernel as pk
from polykernel.backends.numba import numba_kernel
from polykernel.errors import (
    KernelCompilationError,
    KernelExecutionError,
    KernelRegistrationError,
)
from polykernel.ffi.targets import names as registered_targets

S = jax.ShapeDtypeStruct


@numba.njit
def add(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


@numba.njit
def split(x, twice, thrice):
    for i in range(x.size):
        twice[i] = x[i] * 2
        thrice[i] = x[i] * 3


@numba.njit
def axpy(x, y, out, alpha, shift):
    for i in range(out.size):
        if x[i] < 0:
            raise ValueError("negative input at", i)
        out[i] = alpha * x[i] + y[i] + shift


def test_single_struct_returns_array_eager_and_jit():
    f = numba_kernel(add, S((5,), jnp.float32))
    x, y = jnp.arange(5.0), jnp.full(5, 2.0)
    out = f(x, y)
    assert isinstance(out, jax.Array)
    np.testing.assert_allclose(out, np.arange(5.0) + 2)
    np.testing.assert_allclose(jax.jit(f)(x, y), np.arange(5.0) + 2)


def test_sequence_of_structs_returns_tuple():
    f = numba_kernel(split, [S((4,), jnp.float32), S((4,), jnp.float32)])
    out = jax.jit(f)(jnp.arange(4.0))
    assert isinstance(out, tuple) and len(out) == 2
    np.testing.assert_allclose(out[0], np.arange(4.0) * 2)
    np.testing.assert_allclose(out[1], np.arange(4.0) * 3)
    single = numba_kernel(add, (S((2,), jnp.float32),))
    assert isinstance(single(jnp.ones(2), jnp.ones(2)), tuple)


def test_scalar_attributes_reach_kernel_by_keyword():
    f = numba_kernel(axpy, S((3,), jnp.float32))
    x, y = jnp.arange(3.0), jnp.ones(3)
    got = f(x, y, shift=np.int32(10), alpha=np.float32(2.0))
    np.testing.assert_allclose(got, 2 * np.arange(3.0) + 11)
    jitted = jax.jit(lambda a, b: f(a, b, alpha=np.float32(-1.0), shift=np.int32(0)))
    np.testing.assert_allclose(jitted(x, y), 1 - np.arange(3.0))


def test_kernel_exception_keeps_type_and_message():
    f = numba_kernel(axpy, S((3,), jnp.float32))
    x = jnp.array([1.0, -1.0, 2.0])
    with pytest.raises(KernelExecutionError, match=r"raised ValueError: .*negative"):
        f(x, x, alpha=np.float32(1), shift=np.int32(0))
    g = jax.jit(lambda a: f(a, a, alpha=np.float32(1), shift=np.int32(0)))
    with pytest.raises(Exception, match=r"'axpy': the kernel raised ValueError"):
        g(x).block_until_ready()
    # the process and the kernel stay usable after an error
    np.testing.assert_allclose(g(jnp.ones(3)), np.full(3, 2.0))


ALL_DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
    np.complex64, np.complex128,
]  # fmt: skip


def _copy_kernel(n):
    names = [f"a{i}" for i in range(n)] + [f"o{i}" for i in range(n)]
    body = "".join(
        f"    for j in range(o{i}.size):\n        o{i}.flat[j] = a{i}.flat[j]\n"
        for i in range(n)
    )
    scope: dict = {}
    exec(f"def copy_many({', '.join(names)}):\n{body}", scope)
    return numba.njit(scope["copy_many"])


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_every_dtype_round_trips_bit_exact():
    rng = np.random.default_rng(0)
    arrays = []
    with jax.enable_x64(True):
        for dt in ALL_DTYPES:
            raw = rng.integers(0, 100, size=(2, 3)).astype(np.float64)
            if np.dtype(dt).kind == "c":
                raw = raw + 1j * raw[::-1]
            arrays.append(raw.astype(dt))
        specs = [S(a.shape, a.dtype) for a in arrays]
        f = numba_kernel(_copy_kernel(len(arrays)), specs)
        outs = jax.jit(f)(*[jnp.asarray(a) for a in arrays])
        for a, o in zip(arrays, outs, strict=True):
            assert o.dtype == a.dtype
            np.testing.assert_array_equal(np.asarray(o), a)


@numba.njit
def halve_f16(x, out):
    # with half_precision="bits", float16 / bfloat16 arrive as uint16 bit views
    for i in range(x.size):
        out[i] = x[i]


def test_float16_and_bfloat16_arrive_as_uint16_bits_on_request():
    for dt in (jnp.float16, jnp.bfloat16):
        x = jnp.array([1.5, -2.0, 0.25], dt)
        f = numba_kernel(halve_f16, S((3,), dt), half_precision="bits")
        got = f(x)
        assert got.dtype == dt
        np.testing.assert_array_equal(
            np.asarray(got).view(np.uint16), np.asarray(x).view(np.uint16)
        )


@numba.njit
def scale_ranks(a0, a1, a2, a3, a4, a5, a6, o0, o1, o2, o3, o4, o5, o6):
    o0[()] = a0[()] * 2
    for j in range(a1.size):
        o1[j] = a1[j] * 2
    for i in range(a2.shape[0]):
        for j in range(a2.shape[1]):
            o2[i, j] = a2[i, j] * 2
    for j in range(a3.size):
        o3.flat[j] = a3.flat[j] * 2
    for j in range(a4.size):
        o4.flat[j] = a4.flat[j] * 2
    o4[1, 1, 0, 2] = a4[1, 1, 0, 2] * 2  # exercises 4-D indexing with real dims
    for j in range(a5.size):
        o5[j] = a5[j] * 2
    for j in range(a6.size):
        o6.flat[j] = a6.flat[j] * 2


def test_ranks_zero_to_four_and_zero_size():
    shapes = [(), (3,), (2, 3), (2, 1, 3), (2, 2, 1, 3), (0,), (2, 0, 3)]
    xs = [jnp.arange(int(np.prod(s)), dtype=jnp.float32).reshape(s) for s in shapes]
    f = numba_kernel(scale_ranks, [S(s, jnp.float32) for s in shapes])
    for x, got in zip(xs, jax.jit(f)(*xs), strict=True):
        assert got.shape == x.shape
        np.testing.assert_allclose(got, np.asarray(x) * 2)


@numba.njit
def add_inplace(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


def test_input_output_aliases_with_donation():
    f = numba_kernel(add_inplace, S((4,), jnp.float32), input_output_aliases={0: 0})
    step = jax.jit(f, donate_argnums=0)
    x = jnp.zeros(4)
    for _ in range(3):
        x = step(x, jnp.ones(4))
    np.testing.assert_allclose(x, np.full(4, 3.0))
    np.testing.assert_allclose(f(jnp.ones(4), jnp.ones(4)), np.full(4, 2.0))


def test_no_new_target_for_repeated_calls_or_new_shapes():
    f = numba_kernel(add, S((6,), jnp.float32))
    f(jnp.ones(6), jnp.ones(6))
    before = len(registered_targets())
    for n in (6, 6, 7, 100):
        g = numba_kernel(add, S((n,), jnp.float32))
        for _ in range(3):
            np.testing.assert_allclose(g(jnp.ones(n), jnp.ones(n)), np.full(n, 2.0))
    assert len(registered_targets()) == before


@numba.njit(error_model="python")
def div_python(x, y, out):
    for i in range(out.size):
        out[i] = x[i] // y[i]


@numba.njit(error_model="numpy")
def div_numpy(x, y, out):
    for i in range(out.size):
        out[i] = x[i] // y[i]


def test_same_body_different_options_never_share_code():
    x, y = jnp.array([1, 4], jnp.int32), jnp.array([1, 0], jnp.int32)
    fnp = numba_kernel(div_numpy, S((2,), jnp.int32))
    assert int(fnp(x, y)[0]) == 1  # numpy model: no check, no exception
    fpy = numba_kernel(div_python, S((2,), jnp.int32))
    with pytest.raises(KernelExecutionError, match="raised ZeroDivisionError"):
        fpy(x, y)


def test_wrong_dtype_or_rank_at_the_target_gives_clear_error():
    f = numba_kernel(add, S((3,), jnp.float32))
    f(jnp.ones(3), jnp.ones(3))
    (target,) = f._targets.values()
    call = jax.ffi.ffi_call(target, S((3,), jnp.float32))
    with pytest.raises(Exception, match=r"input 1 must be float32\[1\].*got int32 of"):
        call(jnp.ones(3), jnp.ones(3, jnp.int32)).block_until_ready()
    with pytest.raises(Exception, match=r"expected 2 inputs, 1 outputs and 0 attr"):
        call(jnp.ones(3)).block_until_ready()
    bad_rank = jax.ffi.ffi_call(target, S((), jnp.float32))
    with pytest.raises(Exception, match=r"output 0 must be float32\[1\]"):
        bad_rank(jnp.ones(3), jnp.ones(3)).block_until_ready()
    with pytest.raises(Exception, match=r"attribute.*got attribute|expected 2 inputs"):
        call(jnp.ones(3), jnp.ones(3), beta=np.float32(1)).block_until_ready()


def test_invalid_arguments_are_rejected_with_clear_errors():
    with pytest.raises(TypeError, match=r"expected a @numba\.njit"):
        numba_kernel(lambda x, out: None, S((1,), jnp.float32))
    with pytest.raises(KernelRegistrationError, match="outs must be"):
        numba_kernel(add, [])
    with pytest.raises(TypeError, match=r"outs\[1\] must have"):
        numba_kernel(add, [S((1,), jnp.float32), 3])
    with pytest.raises(pk.UnsupportedDtypeError, match=r"'add': outs\[0\] has dtype "
                       r"int4, which the numba backend cannot take; it takes bool"):
        numba_kernel(add, S((1,), jnp.int4))
    with pytest.raises(KernelRegistrationError, match="vmap_method must be one of"):
        numba_kernel(add, S((1,), jnp.float32), vmap_method="magic")
    with pytest.raises(KernelRegistrationError, match="there are 1 outputs"):
        numba_kernel(add, S((1,), jnp.float32), input_output_aliases={0: 3})
    f = numba_kernel(axpy, S((1,), jnp.float32))
    x = jnp.ones(1)
    with pytest.raises(pk.KernelCallError, match="expected a real number, got ndarr"):
        f(x, x, alpha=np.ones(2, np.float32), shift=np.int32(0))
    with pytest.raises(pk.KernelCallError, match="is a traced value"):
        jax.jit(lambda a, s: f(a, a, alpha=s, shift=np.int32(0)))(x, 1.0)
    g = numba_kernel(add, S((1,), jnp.float32), input_output_aliases={5: 0})
    with pytest.raises(KernelRegistrationError, match="names input 5, but the call"):
        g(x, x)


@numba.njit
def untypable(x, out):
    out[0] = x.no_such_attribute


def test_numba_typing_error_becomes_compilation_error():
    f = numba_kernel(untypable, S((1,), jnp.float32))
    with pytest.raises(KernelCompilationError, match="Numba could not compile"):
        f(jnp.ones(1))


def test_attribute_names_must_be_identifiers():
    f = numba_kernel(add, S((1,), jnp.float32))
    with pytest.raises(pk.KernelCallError, match="is not a valid Python identif"):
        f(jnp.ones(1), jnp.ones(1), **{"not-a-name": np.float32(1)})


@numba.njit
def axpy_in_place(x, y, out):
    for i in range(out.size):
        out[i] = 2 * x[i] + y[i]


@pytest.mark.parametrize("vmap_method", ["expand_dims", "broadcast_all", "sequential"])
def test_vmap_with_an_unbatched_aliased_input(vmap_method):
    # XLA refuses an aliased operand with a size-one batch axis against an output
    # with the batch: with aliases, expand_dims batches as broadcast_all.
    n = 8
    f = numba_kernel(axpy_in_place, S((n,), jnp.float32), vmap_method=vmap_method,
                     input_output_aliases={1: 0})  # fmt: skip
    xs = jnp.arange(3 * n, dtype=jnp.float32).reshape(3, n)
    got = jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, jnp.ones(n, jnp.float32))
    np.testing.assert_array_equal(got, 2 * np.asarray(xs) + 1)


def test_the_kernel_compiles_without_wrappers_and_leaves_the_users_dispatcher_alone():
    """The handler calls the native function: Numba's CPython and cfunc wrappers
    are not built (they cost most of a first compile's codegen), and the user's
    own dispatcher neither gains an overload it cannot call nor changes."""
    from polykernel.backends.numba.compile import NO_WRAPPERS, compile_kernel
    from polykernel.ffi.handler_ir.signature import Signature

    @numba.njit(fastmath=True)
    def scale(x, out, factor):
        for i in range(out.size):
            out[i] = x[i] * factor

    f = numba_kernel(scale, S((4,), jnp.float32))
    got = f(jnp.arange(4, dtype=jnp.float32), factor=np.float32(3))
    assert np.asarray(got).tolist() == [0.0, 3.0, 6.0, 9.0]
    assert scale.signatures == []  # the user's dispatcher compiled nothing
    expected = np.empty(4, np.float32)
    scale(np.arange(4, dtype=np.float32), expected, np.float32(3))  # from Python
    assert expected.tolist() == [0.0, 3.0, 6.0, 9.0]

    private: dict = {}
    sig = Signature(ins=(("float32", 1),), outs=(("float32", 1),),
                    attrs=(("factor", "float32"),))  # fmt: skip
    binding = compile_kernel(scale, sig, private)
    copy = private[id(scale)]
    assert copy is not scale and copy.py_func is scale.py_func
    assert copy.targetoptions == {**scale.targetoptions, **NO_WRAPPERS}
    defined = [fn.name for fn in binding.cres.library._final_module.functions
               if not fn.is_declaration]  # fmt: skip
    assert defined == [binding.cres.fndesc.mangled_name]  # the kernel alone
    assert compile_kernel(scale, sig, private).cres is binding.cres  # memoised
