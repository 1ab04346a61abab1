"""One table of rules x backends: the same mistake is the same error everywhere.

Every backend — numba, numba_cuda, warp, pallas, triton, cuda_raw, jax_raw and the
out-of-tree ctypes plugin (``tests/support/ctypes_backend.py``) — runs every row on
the same tiny kernel, ``out = alpha * x`` (``tests/support/conformance_backends.py``;
a new backend gets every row by adding its one line there). A row names the rule,
the exception class and the message, pinned with ``pytest.raises(match=...)``, or
the result. The only per-backend columns are what the technology decides: the dtype
rule of ``alpha`` (declared, inferred by its rule, or static), an output dtype it
cannot take, its launch parameter (the launch rows run where there is one) and
whether its CPU path is a host callback (which ``jax.export`` cannot serialise).

Rows: ``outs`` mistakes and the output dtype rule; aliases; ``vmap_method``;
missing, unknown and ill-named keywords and traced values; scalar values; launch
parameters; a launch of nothing; and the transform matrix (eager, ``jit``, ``vmap``
with every ``vmap_method``, ``jvp``, ``grad``, a ``jax.export`` round trip).
GPU-only facts (a launch on a GPU) are not here: ``make test-gpu``.
"""

from __future__ import annotations

import math
import re
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conformance_backends import (
    F3,
    LAUNCH_VALUES,
    LAUNCHED,
    SUBJECTS,
    S,
    gain,
    primitive,
)

import polykernel as pk

X = jnp.arange(3, dtype=jnp.float32)
XB = jnp.stack([X, X + 10])  # a batch of two
ALPHA = 2.0
OK = "ok"
PASSED = "passed as given"  # a static value reaches the body unchanged

by_backend = pytest.mark.parametrize("subject", SUBJECTS, ids=repr)
launched = pytest.mark.parametrize("subject", LAUNCHED, ids=repr)


def _run(subject: Any, *args: Any, outs: Any = F3, options: Any = None,
         **keywords: Any) -> Any:  # fmt: skip
    f = subject.kernel(outs, **(options or {}))
    return jax.block_until_ready(f(*(args or (X,)), **keywords))


def _close(got: Any, want: Any) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6,
                               equal_nan=True)  # fmt: skip


# -- outs -----------------------------------------------------------------------------
_NOT_OUTS = r"outs must be a jax.ShapeDtypeStruct or a non-empty list/tuple \(or " \
            r"pytree\) of them, one per kernel output \(got {}\)"  # fmt: skip
OUTS_CASES = [
    ("none", None, pk.KernelRegistrationError, _NOT_OUTS.format("None")),
    ("int", 3, pk.KernelRegistrationError, _NOT_OUTS.format("3")),
    ("empty", [], pk.KernelRegistrationError, _NOT_OUTS.format(r"\[\]")),
    ("not-a-struct", [3], pk.KernelTypeError,
     r"outs\[0\] must have .shape and .dtype, e.g. jax.ShapeDtypeStruct\(shape, "
     r"dtype\) \(got int: 3\)"),
    ("negative-dimension", S((-1,), jnp.float32), pk.KernelRegistrationError,
     r"outs\[0\] has shape \(-1,\); dimensions must be >= 0"),
    ("fractional-dimension", SimpleNamespace(shape=(1.5,), dtype=np.float32),
     pk.KernelTypeError, r"outs\[0\] has shape \(1.5,\); every dimension must be an "
     r"int"),
    ("not-a-dtype", SimpleNamespace(shape=(3,), dtype="nope"), pk.KernelTypeError,
     r"outs\[0\] has dtype 'nope', which is not a NumPy/JAX dtype"),
]  # fmt: skip


@by_backend
def test_an_output_dtype_outside_the_backends_rule(subject):
    if subject.refused is None:  # it takes every dtype JAX has: the kernel is made
        subject.kernel(S((3,), jnp.bfloat16))
        return
    outs = S((3,), np.dtype(subject.refused))
    with pytest.raises(pk.UnsupportedDtypeError, match=rf"outs\[0\] has dtype "
                       rf"{subject.refused}, which the {subject.name} backend cannot "
                       rf"take; it takes .*float32.*\. Use one of these \(cast with "
                       rf"\.astype\), or a backend that takes {subject.refused}\."
                       ) as info:  # fmt: skip
        _run(subject, outs=outs, alpha=ALPHA)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


# -- aliases and vmap_method --------------------------------------------------------
OPTION_CASES = [
    ("aliases-not-a-dict", {"input_output_aliases": "a"}, pk.KernelTypeError,
     r"input_output_aliases must be a dict \{input index: output index\} of ints, "
     r"or None \(got str: 'a'\)"),
    ("aliases-no-such-output", {"input_output_aliases": {0: 3}},
     pk.KernelRegistrationError, r"input_output_aliases maps input 0 to output 3, "
     r"but there are 1 outputs"),
    ("aliases-no-such-input", {"input_output_aliases": {5: 0}},
     pk.KernelRegistrationError, r"input_output_aliases names input 5, but the call "
     r"has 1 input \(indices 0 to 0\)"),
    ("aliases-two-to-one", {"input_output_aliases": {0: 0, 1: 0}},
     pk.KernelRegistrationError, r"maps several inputs to one output"),
    ("vmap-method-unknown", {"vmap_method": "magic"}, pk.KernelRegistrationError,
     r"vmap_method must be one of \(None, 'sequential', 'sequential_unrolled', "
     r"'expand_dims', 'broadcast_all'\), got 'magic'"),
    ("vmap-method-not-a-string", {"vmap_method": 3}, pk.KernelRegistrationError,
     r"vmap_method must be one of .*, got 3"),
]  # fmt: skip


# The outs and option rows, each as the keyword of ``_run`` it sets.
KERNEL_ARGUMENT_CASES = [
    pytest.param({argument: value}, exc, pattern, id=case)
    for argument, cases in (("outs", OUTS_CASES), ("options", OPTION_CASES))
    for case, value, exc, pattern in cases
]


@by_backend
@pytest.mark.parametrize(("argument", "exc", "pattern"), KERNEL_ARGUMENT_CASES)
def test_outs_and_option_mistakes(subject, argument, exc, pattern):
    with pytest.raises(exc, match=pattern):
        _run(subject, **argument, alpha=ALPHA)


@by_backend
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_an_aliased_output_is_computed_and_batches_as_broadcast_all(subject):
    f = subject.kernel(F3, input_output_aliases={0: 0})
    assert f.vmap_method == "broadcast_all"
    _close(f(X + 1, alpha=ALPHA), ALPHA * (X + 1))
    _close(jax.jit(jax.vmap(lambda r: f(r, alpha=ALPHA)))(XB), ALPHA * XB)


@by_backend
def test_vmap_method_none_means_expand_dims(subject):
    assert subject.kernel(F3, vmap_method=None).vmap_method == "expand_dims"


# -- keywords -------------------------------------------------------------------------
def _kind(subject: Any) -> str:
    return {"float32": "float32", "static": "static"}.get(subject.rule, "inferred")


@by_backend
def test_a_missing_keyword(subject):
    with pytest.raises(pk.KernelCallError, match=rf"scale'?: missing keyword "
                       rf"argument 'alpha' \((.*takes? the call's \d arrays?; )?"
                       rf"parameters: alpha: {_kind(subject)}\b.*\); pass it as a "
                       rf"keyword\.$"):  # fmt: skip
        _run(subject)


def _declare_or_spell(subject: Any) -> str:
    """The fix an unknown keyword's message gives: an out-of-tree backend (the
    ctypes plugin) may have left the parameter undeclared (issue 37)."""
    if subject.name != "ctypes_c":
        return r"pass only the kernel's parameters as keywords \(check the spelling\)\."
    return (r"check the spelling\. If the kernel does take 'beta', the out-of-tree "
            r"backend 'ctypes_c' \(ctypes_backend\.CtypesKernel\) must declare it: "
            r"pass parameters=\{'beta': 'float32'\} .* to BackendKernel\.__init__ "
            r"in the plugin \(or report it to the plugin's authors\)\.")  # fmt: skip


@by_backend
def test_an_unknown_keyword(subject):
    with pytest.raises(pk.KernelCallError, match=rf"scale'?: unknown keyword "
                       rf"argument 'beta' \((.*takes? the call's \d arrays?; )?"
                       rf"parameters: alpha: {_kind(subject)}\b.*\); "
                       rf"{_declare_or_spell(subject)}$"):  # fmt: skip
        _run(subject, alpha=ALPHA, beta=1.0)


@by_backend
def test_a_keyword_that_is_no_identifier(subject):
    with pytest.raises(pk.KernelCallError, match=r"attribute name 'class' is not a "
                       r"valid Python identifier"):  # fmt: skip
        _run(subject, **{"alpha": ALPHA, "class": 1})


@by_backend
def test_a_traced_value(subject):
    f = subject.kernel(F3)
    with pytest.raises(
        pk.KernelCallError,
        match=r"attribute 'alpha' is a traced "
        r"value; scalar keywords are compile-time constants",
    ):
        jax.jit(lambda x, a: f(x, alpha=a))(X, ALPHA)


# -- scalar values ------------------------------------------------------------------
_NOT_REAL = (pk.KernelCallError, r"attribute 'alpha'=.* cannot be converted to .*: "
             r"expected a real number, got {detail}\.")  # fmt: skip
_NO_TYPE = (pk.KernelCallError, r"attribute 'alpha'=.* cannot be converted to a "
            r"scalar: {detail} values have no scalar type here")  # fmt: skip
_RANGE = (pk.AttributeValueError, r"attribute 'alpha'=.* cannot be converted to "
          r"{detail}: out of its range")  # fmt: skip
_UNHASHABLE = (pk.KernelCallError, r"attribute 'alpha'=.* is a static value \(a "
               r"compile-time constant, passed as it is\), so it must be hashable "
               r"\(got {detail}\)")  # fmt: skip
# (id, value, {rule: outcome}, detail); a rule missing from a row is "*"'s outcome.
SCALAR_CASES = [
    ("none", None, {"*": _NOT_REAL, "static": PASSED}, "NoneType"),
    ("string", "2.5", {"*": _NOT_REAL, "static": PASSED}, "str"),
    ("complex", 1j, {"*": _NOT_REAL, "static": PASSED}, "complex"),
    ("numpy-complex", np.complex64(1), {"*": _NOT_REAL, "static": PASSED},
     "complex64"),
    ("array", np.ones(2, np.float32), {"*": _NOT_REAL, "static": _UNHASHABLE},
     "ndarray"),
    ("list", [2.0], {"*": _NOT_REAL, "static": _UNHASHABLE}, "list"),
    ("int-beyond-int64", 2**70, {"float32": OK, "*": _RANGE, "static": PASSED},
     "int64"),
    ("int-beyond-float64", 10**400, {"float32": _RANGE, "*": _RANGE,
     "static": PASSED}, "(float32|int64)"),
    ("float-beyond-float32", 1e300, {"float32": _RANGE, "triton": _RANGE, "*": OK,
     "static": PASSED}, "float32"),
    ("wider-numpy-float", np.float64(1e300), {"float32": _RANGE, "*": OK,
     "static": PASSED}, "float32"),
    ("numpy-float16", np.float16(1.5), {"numba": _NO_TYPE, "*": OK,
     "static": PASSED}, "float16"),
    ("int", 3, {"*": OK}, ""),
    ("numpy-int8", np.int8(-3), {"*": OK}, ""),
    ("bool", True, {"*": OK}, ""),
    ("nan", math.nan, {"*": OK}, ""),
    ("minus-inf", -math.inf, {"*": OK}, ""),
]  # fmt: skip


def _seen_alpha(subject: Any, value: Any) -> float:
    """``alpha`` as the subject's kernel computes with it (float64 for Numba's rule
    and for NumPy float64 values; float32 otherwise)."""
    wide = subject.rule in ("numba", "numba_cuda") or isinstance(value, np.float64)
    if subject.rule == "static":
        return float(np.float32(gain(value)))
    with np.errstate(over="ignore"):
        return float(value) if wide else float(np.float32(value))


# The kernels' own arithmetic may overflow (1e300 * x): NumPy warns about it inside
# the CPU emulators and JAX when it casts the value; that is not the rule tested.
@pytest.mark.filterwarnings(
    "ignore:.*(overflow|invalid value) encountered:RuntimeWarning"
)
@by_backend
@pytest.mark.parametrize(("case", "value", "outcomes", "detail"),
                         [pytest.param(*c, id=c[0]) for c in SCALAR_CASES])  # fmt: skip
def test_scalar_values(subject, case, value, outcomes, detail):
    expected = outcomes.get(subject.rule, outcomes.get("*"))
    if expected == PASSED:
        f = subject.kernel(F3)
        jax.jit(lambda x: f(x, alpha=value))(X)
        assert subject.seen[-1] is value or (
            type(subject.seen[-1]) is type(value) and subject.seen[-1] == value
        )
        return
    if expected == OK:
        with np.errstate(over="ignore", invalid="ignore"):
            want = np.asarray(X, np.float64) * _seen_alpha(subject, value)
            want = want.astype(np.float32)
        _close(_run(subject, alpha=value), want)
        return
    exc, pattern = expected
    with pytest.raises(exc, match=pattern.format(detail=detail)):
        _run(subject, alpha=value)


# -- launch parameters ----------------------------------------------------------------


@launched
@pytest.mark.parametrize(("case", "value", "pattern", "shown"),
                         [pytest.param(*v, id=v[0])
                          for v in LAUNCH_VALUES])  # fmt: skip
def test_launch_parameter_values(subject, case, value, pattern, shown):
    name, _ = subject.launch
    with pytest.raises(pk.KernelRegistrationError,
                       match=pattern.format(name=name, value=shown)):  # fmt: skip
        subject.kernel(F3, **{name: value})


@launched
def test_too_many_launch_axes(subject):
    name, rank = subject.launch
    with pytest.raises(pk.KernelRegistrationError, match=rf"{name} must be .*[01] to "
                       rf"{rank} ints"):  # fmt: skip
        subject.kernel(F3, **{name: (1,) * (rank + 1)})


@by_backend
@pytest.mark.parametrize("aliased", [False, True], ids=["zeros", "aliased-input"])
def test_a_launch_of_nothing(subject, aliased):
    """An empty launch (a launch parameter of 0, else empty arrays) gives zeros, or
    the aliased input, never uninitialised memory."""
    options = {"input_output_aliases": {0: 0}} if aliased else {}
    if subject.launch is None:
        empty = S((0,), jnp.float32)
        out = _run(subject, jnp.zeros(0, jnp.float32), outs=empty, options=options,
                   alpha=ALPHA)  # fmt: skip
        assert out.shape == (0,) and out.dtype == jnp.float32
        return
    options[subject.launch[0]] = 0
    want = X + 1 if aliased else np.zeros(3, np.float32)
    _close(_run(subject, X + 1, options=options, alpha=ALPHA), want)


# -- the transform matrix -------------------------------------------------------------
VMAP_METHODS = [None, "sequential", "sequential_unrolled", "expand_dims",
                "broadcast_all"]  # fmt: skip


@by_backend
def test_eager_and_jit(subject):
    f = subject.kernel(F3)
    _close(f(X, alpha=ALPHA), ALPHA * X)
    _close(jax.jit(lambda x: f(x, alpha=ALPHA))(X), ALPHA * X)
    op = primitive(subject)
    _close(op(X, outs=[F3], alpha=ALPHA)[0], ALPHA * X)
    _close(jax.jit(lambda x: op(x, outs=[F3], alpha=ALPHA)[0])(X), ALPHA * X)


@by_backend
@pytest.mark.parametrize("method", VMAP_METHODS, ids=str)
def test_vmap_with_every_method(subject, method):
    f = subject.kernel(F3, vmap_method=method)
    _close(jax.vmap(lambda r: f(r, alpha=ALPHA))(XB), ALPHA * XB)
    _close(jax.jit(jax.vmap(lambda r: f(r, alpha=ALPHA)))(XB), ALPHA * XB)


@by_backend
def test_vmap_of_the_primitive(subject):
    _close(jax.vmap(_call(subject))(XB), ALPHA * XB)


def _call(subject: Any) -> Any:
    op = primitive(subject)
    return lambda x: op(x, outs=[F3], alpha=ALPHA)[0]


@by_backend
def test_jvp(subject):
    primal, tangent = jax.jvp(_call(subject), (X,), (jnp.ones(3, jnp.float32),))
    _close(primal, ALPHA * X)
    _close(tangent, np.full(3, ALPHA, np.float32))


@by_backend
def test_grad(subject):
    f = _call(subject)
    _close(jax.grad(lambda x: jnp.sum(f(x) ** 2))(X), 2 * ALPHA**2 * X)
    _close(jax.jit(jax.grad(lambda x: jnp.sum(f(x))))(X), np.full(3, ALPHA))


@by_backend
def test_an_export_round_trip(subject):
    fn = jax.jit(_call(subject))
    if subject.host_callback:
        # Its CPU path is an emulator behind jax.pure_callback: JAX refuses it.
        with pytest.raises(NotImplementedError, match=re.escape(
                "serialization of host_callbacks is not yet implemented")):  # fmt: skip
            pk.export(fn)(F3).serialize()
        return
    blob = pk.export(fn)(F3).serialize()
    _close(pk.load_exported(blob).call(X), ALPHA * X)


# -- standing checks ----------------------------------------------------------------
def test_every_builtin_backend_and_the_plugin_are_in_the_table():
    from polykernel.backends import BUILTIN

    assert {s.name for s in SUBJECTS} == {*BUILTIN, "ctypes_c"}


def test_no_backend_overrides_the_rules():
    """The base class's converter and call are the only ones: a backend declares."""
    from subprocess_support import REPO

    pattern = re.compile(r"def (convert_scalars|__call__)\(")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "src" / "polykernel" / "backends").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []
