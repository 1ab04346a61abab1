"""Wider scalar-keyword and launch-parameter cases, run through every backend that
takes them.

``tests/contract/test_conformance.py`` is the table of every rule x every backend (one
float scalar, one launch parameter each); this file keeps the cases that need more:
four declared scalar dtypes at once (float32, int32, uint32, bool), every launch
parameter of a backend (Numba-CUDA's ``grid``, ``block`` and ``launch_dims``) and
the launch counts.

Every backend that takes scalar keywords (``numba``, ``warp``, ``triton`` and the
``cuda_raw`` functions of a native module) converts them through the one refusing
converter (``polykernel.contract.scalars``), and every backend that takes a launch
configuration (``numba_cuda``, ``warp``, ``triton``, ``pallas``) checks it by the
rules of ``polykernel.contract.launch``. So one row gives the same exception class
and message shape on every backend; where the *outcome* differs it is only because
the parameter's dtype differs — declared by the kernel (Warp annotations, native
specs) or inferred from the value by the backend's documented rule (Numba: a
Python ``int`` is int64, a ``float`` float64; Triton: int32 when it fits, a
``float`` is float32) — and the row says so.

The kernels compute ``out = alpha * x + n + u + flag`` with ``alpha`` float32,
``n`` int32, ``u`` uint32 and ``flag`` bool where the types are declared.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from conformance_backends import LAUNCH_VALUES
from reliability_support import F3, assert_usable

import polykernel as pk
from polykernel.catalog._support import has_cxx

X = jnp.arange(3, dtype=jnp.float32)
GOOD = {"alpha": 2.0, "n": 1, "u": 1, "flag": True}
OK = "ok"
SCALAR_BACKENDS = ["numba", "warp", "triton", "cuda_raw"]
DECLARED = {"warp", "cuda_raw"}  # the others infer the dtype from the value


@numba.njit
def _numba_body(x, out, alpha, n, u, flag):
    for i in range(out.size):
        out[i] = alpha * x[i] + n + u + (1.0 if flag else 0.0)


def _numba() -> Any:
    return pk.numba_kernel(_numba_body, F3)


def _warp() -> Any:
    wp = pytest.importorskip("warp")

    wp.config.quiet = True

    @wp.kernel
    def body(x: wp.array(dtype=wp.float32), alpha: wp.float32, n: wp.int32,
             u: wp.uint32, flag: wp.bool, out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = alpha * x[i] + float(n) + float(u) + wp.where(flag, 1.0, 0.0)

    return pk.warp_kernel(body, F3)


def _triton() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def body(x_ptr, out_ptr, alpha, n, u, flag, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < 3
        x = tl.load(x_ptr + offs, mask=m)
        y = alpha * x + n + u + tl.where(flag != 0, 1.0, 0.0)
        tl.store(out_ptr + offs, y, mask=m)

    return pk.triton_kernel(body, F3, grid=1, BLOCK=4)


_CPP = """
void affine(const pk::Tensor& x, pk::Tensor& out, float alpha, int32_t n,
            uint32_t u, bool flag) {
  const float* a = x.data_ptr<float>(); float* b = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i)
    b[i] = alpha * a[i] + n + u + (flag ? 1.0f : 0.0f);
}
"""


def _cuda_raw() -> Any:
    module = pk.load_cpp_inline("rel_contract_affine", _CPP, ["affine"])
    return lambda x, **kw: module.affine(x, outs=F3, **kw)


_MAKERS = {"numba": _numba, "warp": _warp, "triton": _triton, "cuda_raw": _cuda_raw}
_MADE: dict[str, Any] = {}


def kernel(backend: str) -> Any:
    if backend == "cuda_raw" and not has_cxx():
        pytest.skip("no C++ compiler")
    if backend not in _MADE:
        _MADE[backend] = _MAKERS[backend]()
    return _MADE[backend]


def _traced(backend: str) -> Any:
    f = kernel(backend)
    return jax.jit(lambda x, a: f(x, **{**GOOD, "alpha": a}))(X, 2.0)


# (id, keywords, {backend kind: (exception, message) or OK}); kinds: "declared",
# "numba", "triton", or "*" for every backend.
_NOT_REAL = (pk.KernelCallError, r"attribute '{name}'=.* cannot be converted to .*"
                                 r"expected a real number, got {type}")  # fmt: skip
_NO_SCALAR_TYPE = (pk.KernelCallError, r"attribute '{name}'=.* cannot be converted")
_RANGE = (pk.AttributeValueError, r"attribute '{name}'=.* cannot be converted to "
                                  r"{dtype}: out of its range")  # fmt: skip
SCALAR_CASES = [
    ("none", {"alpha": None}, {"*": _NOT_REAL}, ("alpha", "NoneType")),
    ("string-number", {"alpha": "2.5"}, {"*": _NOT_REAL}, ("alpha", "str")),
    ("string-bool", {"flag": "False"}, {"*": _NOT_REAL}, ("flag", "str")),
    ("complex", {"alpha": 1j}, {"*": _NOT_REAL}, ("alpha", "complex")),
    ("numpy-complex", {"alpha": np.complex64(1)},
     {"declared": _NOT_REAL, "numba": _NO_SCALAR_TYPE, "triton": _NO_SCALAR_TYPE},
     ("alpha", "complex64")),
    ("array", {"alpha": np.ones(2, np.float32)}, {"*": _NOT_REAL},
     ("alpha", "ndarray")),
    ("int-beyond-every-type", {"n": 2**70},
     {"declared": _RANGE, "numba": _RANGE, "triton": _RANGE}, ("n", "int(32|64)")),
    ("int-as-float-beyond-float64", {"alpha": 10**400},
     {"declared": _RANGE, "numba": _RANGE, "triton": _RANGE},
     ("alpha", "(float32|int64)")),
    ("int-beyond-int32", {"n": 2**40},
     {"declared": _RANGE, "numba": OK, "triton": OK}, ("n", "int32")),
    ("negative-for-unsigned", {"u": -1},
     {"declared": _RANGE, "numba": OK, "triton": OK}, ("u", "uint32")),
    ("float-beyond-float32", {"alpha": 1e300},
     {"declared": _RANGE, "triton": _RANGE, "numba": OK}, ("alpha", "float32")),
    ("wider-numpy-float", {"alpha": np.float64(1e300)},
     {"declared": _RANGE, "triton": OK, "numba": OK}, ("alpha", "float32")),
    ("wider-numpy-int", {"n": np.int64(2**40)},
     {"declared": _RANGE, "triton": OK, "numba": OK}, ("n", "int32")),
    ("fractional-for-int", {"n": 2.5},
     {"declared": (pk.AttributeValueError, r"attribute 'n'=2.5 cannot be converted "
                   r"to int32: an integer attribute needs an integral value"),
      "numba": OK, "triton": OK}, ("n", "")),
    ("number-for-bool", {"flag": 2},
     {"declared": (pk.AttributeValueError, r"attribute 'flag'=2 cannot be converted "
                   r"to bool: a bool attribute takes True, False, 0 or 1"),
      "numba": OK, "triton": OK}, ("flag", "")),
    ("bool-for-number", {"alpha": True}, {"*": OK}, ("alpha", "")),
    ("nan-written-by-caller", {"alpha": math.nan}, {"*": OK}, ("alpha", "")),
    ("inf-written-by-caller", {"alpha": -math.inf}, {"*": OK}, ("alpha", "")),
]  # fmt: skip


def _expected(backend: str, outcomes: dict[str, Any]) -> Any:
    kind = "declared" if backend in DECLARED else backend
    return outcomes.get("*", outcomes.get(kind))


def _reference(backend: str, keywords: dict[str, Any]) -> np.ndarray:
    """The kernel's result in float64, rounded to the float32 output. ``alpha`` is
    float32 where declared or a Python float for Triton; float64 for Numba's Python
    floats and any backend inferring from a float64 NumPy scalar (it may overflow
    float32 only in the output)."""
    v = {**GOOD, **keywords}
    wide = backend == "numba" or (
        backend not in DECLARED and isinstance(v["alpha"], np.float64)
    )
    with np.errstate(over="ignore"):
        alpha = float(v["alpha"]) if wide else float(np.float32(v["alpha"]))
    x = np.asarray(X, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        out = alpha * x + float(v["n"]) + float(v["u"]) + float(bool(v["flag"]))
        return out.astype(np.float32)


@pytest.mark.bad_input
@pytest.mark.parametrize("backend", SCALAR_BACKENDS)
@pytest.mark.parametrize(("case", "keywords", "outcomes", "names"),
                         [pytest.param(*c, id=c[0]) for c in SCALAR_CASES])  # fmt: skip
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_scalar_keywords_follow_one_set_of_rules(
    backend, case, keywords, outcomes, names
):
    f = kernel(backend)
    expected = _expected(backend, outcomes)
    if expected == OK:
        out = np.asarray(f(X, **{**GOOD, **keywords}))
        want = _reference(backend, keywords)
        np.testing.assert_allclose(out, want, rtol=1e-6, equal_nan=True)
    else:
        exc, pattern = expected
        name, detail = names
        message = pattern.format(name=name, type=detail, dtype=detail)
        with pytest.raises(exc, match=message):
            jax.block_until_ready(f(X, **{**GOOD, **keywords}))
    assert_usable()


@pytest.mark.bad_input
@pytest.mark.parametrize("backend", SCALAR_BACKENDS)
def test_a_traced_scalar_is_refused_the_same_way(backend):
    with pytest.raises(pk.KernelCallError, match="attribute 'alpha' is a traced value"):
        _traced(backend)


# -- launch parameters ----------------------------------------------------------------
def _numba_cuda(**kw: Any) -> Any:
    from numba import cuda

    @cuda.jit
    def copy(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]

    return pk.numba_cuda_kernel(copy, F3, **kw)


def _warp_launch(**kw: Any) -> Any:
    wp = pytest.importorskip("warp")

    @wp.kernel
    def copy(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
        out[wp.tid()] = x[wp.tid()]

    return pk.warp_kernel(copy, F3, **kw)


def _triton_launch(**kw: Any) -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def copy(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < 3), mask=offs < 3)

    return pk.triton_kernel(copy, F3, **{"grid": 1, "BLOCK": 4, **kw})


def _pallas_launch(**kw: Any) -> Any:
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    return pk.pallas_kernel(copy, F3, **kw)


# (backend, maker, parameter, other keywords its check needs, max rank)
LAUNCH_PARAMETERS = [
    ("numba_cuda", _numba_cuda, "grid", {"block": 32}, 3),
    ("numba_cuda", _numba_cuda, "block", {"grid": 1}, 3),
    ("numba_cuda", _numba_cuda, "launch_dims", {}, 3),
    ("warp", _warp_launch, "launch_dims", {}, 4),
    ("triton", _triton_launch, "grid", {}, 3),
    ("pallas", _pallas_launch, "grid", {}, 6),
]


@pytest.mark.bad_input
@pytest.mark.parametrize(("backend", "maker", "name", "others", "rank"),
                         [pytest.param(*p, id=f"{p[0]}-{p[2]}")
                          for p in LAUNCH_PARAMETERS])  # fmt: skip
@pytest.mark.parametrize(("case", "value", "pattern", "shown"),
                         [pytest.param(*v, id=v[0])
                          for v in LAUNCH_VALUES])  # fmt: skip
def test_launch_parameters_follow_one_set_of_rules(
    backend, maker, name, others, rank, case, value, pattern, shown
):
    message = pattern.format(name=name, value=shown)
    with pytest.raises(pk.KernelRegistrationError, match=message):
        maker(**{name: value, **others})
    assert_usable()


@pytest.mark.bad_input
@pytest.mark.parametrize(("backend", "maker", "name", "others", "rank"),
                         [pytest.param(*p, id=f"{p[0]}-{p[2]}")
                          for p in LAUNCH_PARAMETERS])  # fmt: skip
def test_too_many_launch_axes_are_refused(backend, maker, name, others, rank):
    with pytest.raises(pk.KernelRegistrationError, match=rf"[01] to {rank} ints"):
        maker(**{name: (1,) * (rank + 1), **others})


@pytest.mark.parametrize(("backend", "maker", "name", "others", "rank"),
                         [pytest.param(*p, id=f"{p[0]}-{p[2]}")
                          for p in LAUNCH_PARAMETERS if p[2] != "block"])  # fmt: skip
def test_a_launch_of_nothing_gives_zeros_not_uninitialised_memory(
    backend, maker, name, others, rank
):
    f = maker(**{name: 0, **others})
    np.testing.assert_array_equal(f(X + 1), np.zeros(3, np.float32))


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_numpy_integers_are_launch_dimensions():
    f = _warp_launch(launch_dims=np.int64(3))
    np.testing.assert_array_equal(f(X), X)


COUNTS = [
    ("numba_cuda-threads_per_block", lambda v: _numba_cuda(launch_dims=3,
                                                           threads_per_block=v),
     "threads_per_block", [0, 2048, "32", 32.0, True]),
    ("numba_cuda-shared_mem", lambda v: _numba_cuda(launch_dims=3, shared_mem=v),
     "shared_mem", [-1, 1.5, "0", None]),
    ("triton-num_warps", lambda v: _triton_launch(num_warps=v), "num_warps",
     [0, 3, 128, "4", 4.0]),
    ("triton-num_stages", lambda v: _triton_launch(num_stages=v), "num_stages",
     [0, 17, "3", 3.0]),
]  # fmt: skip


@pytest.mark.bad_input
@pytest.mark.parametrize(("case", "make", "name", "values"),
                         [pytest.param(*c, id=c[0]) for c in COUNTS])  # fmt: skip
def test_launch_counts_follow_one_set_of_rules(case, make, name, values):
    for value in values:
        with pytest.raises(pk.KernelRegistrationError, match=rf"{name} must be "):
            make(value)
    assert_usable()
