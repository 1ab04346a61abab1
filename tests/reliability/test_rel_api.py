"""Bad inputs across the Python API: each raises our error and the process stays usable.

Tables: ``NUMBA_KERNEL`` (``numba_kernel`` construction and calls), ``PRIMITIVE``
(``XLACustomKernel``, its ``def_*`` methods, ``set_default``, calls), ``SETTINGS``
(``polykernel.config`` / preferences, registry, transforms helpers).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from reliability_support import F3, S, bad, run_case

import polykernel as pk
from polykernel import errors as E
from polykernel.cache import admin as cache_admin

X = jnp.ones(3, jnp.float32)


@numba.njit
def add1(x, out):
    for i in range(out.size):
        out[i] = x[i] + 1


@numba.njit
def scale(x, out, alpha):
    for i in range(out.size):
        out[i] = x[i] * alpha


@numba.njit
def raises(x, out):
    raise ValueError("numba kernel boom")


def _nk(**kw):
    return pk.numba_kernel(add1, F3, **kw)


def _sc():
    return pk.numba_kernel(scale, F3)


NUMBA_KERNEL = [
    bad("kernel-not-njit", lambda: pk.numba_kernel(lambda x, o: None, F3),
        E.KernelTypeError, r"expected a @numba.njit function, got function"),
    bad("kernel-none", lambda: pk.numba_kernel(None, F3),
        TypeError, r"expected a @numba.njit function, got NoneType"),
    bad("outs-none", lambda: pk.numba_kernel(add1, None),
        ValueError, r"'add1': outs must be a jax.ShapeDtypeStruct .* \(got None\)"),
    bad("outs-int", lambda: pk.numba_kernel(add1, 3),
        E.KernelRegistrationError, r"outs must be .* \(got 3\)"),
    bad("outs-empty", lambda: pk.numba_kernel(add1, []),
        ValueError, r"non-empty list/tuple \(or pytree\) of them, one per kernel "
        r"output \(got \[\]\)"),
    bad("outs-object-dtype", lambda: pk.numba_kernel(add1, S((3,), object)),
        E.UnsupportedDtypeError, r"outs\[0\] has dtype object, which the numba "
        r"backend cannot take; it takes bool, int8"),
    bad("vmap-method-bogus", lambda: _nk(vmap_method="bogus"),
        ValueError, r"vmap_method must be one of .* got 'bogus'"),
    bad("aliases-not-dict", lambda: _nk(input_output_aliases="a"),
        TypeError, r"input_output_aliases must be a dict .* \(got str"),
    bad("aliases-bad-output", lambda: _nk(input_output_aliases={0: 4}),
        ValueError, r"maps input 0 to output 4, but there are 1 outputs"),
    bad("aliases-bad-input", lambda: _nk(input_output_aliases={5: 0})(X),
        ValueError, r"input_output_aliases names input 5, but the call has 1"),
    bad("half-precision-bogus", lambda: _nk(half_precision="maybe"),
        ValueError, r"half_precision must be one of .* got 'maybe'"),
    bad("input-complex-dtype", lambda: _nk()(jnp.ones(3, jnp.complex64)),
        E.KernelCompilationError, r"could not compile the kernel for inputs "
        r"\(complex64\[1\]\)"),
    bad("input-wrong-rank", lambda: _nk()(jnp.ones((3, 3))),
        E.KernelCompilationError, r"inputs \(float32\[2\]\), outputs \(float32\[1\]\)"),
    bad("input-string", lambda: _nk()("abc"),
        TypeError, r"'add1': input 0 \(str\) is not an array JAX accepts"),
    bad("input-ragged", lambda: _nk()([[1, 2], [3]]),
        E.KernelTypeError, r"input 0 \(list\) is not an array JAX accepts"),
    bad("too-many-inputs", lambda: _nk()(X, X),
        E.KernelCompilationError, r"too many positional arguments"),
    bad("too-few-inputs", lambda: _nk()(),
        E.KernelCallError, r"'add1': missing keyword argument 'out' \(x takes the "
        r"call's 1 array; parameters: out: inferred\)"),
    bad("attr-unknown", lambda: _nk()(X, a=1),
        E.KernelCallError, r"'add1': unknown keyword argument 'a' \(x, out take the "
        r"call's 2 arrays; parameters: none\)"),
    bad("attr-array", lambda: _sc()(X, alpha=np.ones(2)),
        E.KernelCallError, r"attribute 'alpha'=array\(\[1\., 1\.\]\) cannot be "
        r"converted to a scalar: expected a real number, got ndarray"),
    bad("attr-list", lambda: _sc()(X, alpha=[1]),
        E.KernelCallError, r"attribute 'alpha'=\[1\] .* expected a real number, got "
        r"list"),
    bad("attr-complex", lambda: _sc()(X, alpha=1j),
        E.KernelCallError, r"attribute 'alpha'=1j .* expected a real number, got "
        r"complex"),
    bad("attr-none", lambda: pk.numba_kernel(scale, F3)(X, alpha=None),
        TypeError, r"attribute 'alpha'=None .* expected a real number, got NoneType"),
    bad("attr-int-beyond-int64", lambda: pk.numba_kernel(scale, F3)(X, alpha=2**70),
        E.AttributeValueError, r"attribute 'alpha'=1180591620717411303424 cannot be "
        r"converted to int64: out of its range"),
    bad("attr-string", lambda: pk.numba_kernel(scale, F3)(X, alpha="2"),
        TypeError, r"attribute 'alpha'='2' .* expected a real number, got str"),
    bad("attr-float16", lambda: _sc()(X, alpha=np.float16(1)),
        E.KernelCallError, r"attribute 'alpha'=np.float16\(1\.0\) cannot be converted "
        r"to a scalar: float16 values have no scalar type here"),
    bad("attr-keyword-name", lambda: _nk()(X, **{"class": 1}),
        E.KernelCallError, r"attribute name 'class' is not a valid Python identifier"),
    bad("attr-missing", lambda: pk.numba_kernel(scale, F3)(X),
        E.KernelCallError, r"'scale': missing keyword argument 'alpha' \(x, out take "
        r"the call's 2 arrays; parameters: alpha: inferred\); pass it as a keyword"),
    bad("attr-traced", lambda: jax.jit(lambda x, a: _sc()(x, alpha=a))(X, 1.0),
        E.KernelCallError, r"attribute 'alpha' is a traced value"),
    bad("kernel-raises", lambda: pk.numba_kernel(raises, F3)(X),
        E.KernelExecutionError, r"'raises': the kernel raised ValueError: numba "
        r"kernel boom"),
    bad("kernel-raises-jit", lambda: jax.jit(pk.numba_kernel(raises, F3))(X),
        Exception, r"the kernel raised ValueError: numba kernel boom"),
]  # fmt: skip


def _op(name: str, gen=None):
    op = pk.XLACustomKernel(f"reliability.api.{name}")
    op.def_jax_raw_kernel(gen or (lambda outs, **kw: lambda x: x + 1))
    return op


OP = _op("op")


def _raising_generator(outs, **kw):
    raise RuntimeError("generator boom")


def _raising_kernel(outs, **kw):
    def kernel(x):
        raise ZeroDivisionError("kernel boom")

    return kernel


def _not_callable_generator(outs, **kw):
    return 42


RAISES_GEN = _op("raising_generator", _raising_generator)
RAISES_KERNEL = _op("raising_kernel", _raising_kernel)
NOT_CALLABLE = _op("not_callable", _not_callable_generator)
TWO_OUTS = _op("two_outs", lambda outs, **kw: lambda x: (x, x))


def _noop(outs, **kw):
    return lambda x: x


PRIMITIVE = [
    bad("name-int", lambda: pk.XLACustomKernel(3),
        E.KernelTypeError, r"name must be a string \(got int: 3\)"),
    bad("name-empty", lambda: pk.XLACustomKernel(""),
        ValueError, r"name must be a non-empty string"),
    bad("def_kernel-backend-int", lambda: OP.def_kernel(1, "cpu", _noop),
        TypeError, r"def_kernel\(\): backend must be a string .* \(got int: 1\)"),
    bad("def_kernel-backend-empty", lambda: OP.def_kernel("", "cpu", _noop),
        ValueError, r"backend must be a non-empty string"),
    bad("def_kernel-platform-unknown", lambda: OP.def_kernel("numba", "xpu", _noop),
        ValueError, r"platform must be one of \['cpu', 'gpu', 'tpu'\] \(got 'xpu'\)"),
    bad("def_kernel-platform-list", lambda: OP.def_kernel("numba", ["cpu"], _noop),
        E.KernelTypeError, r"platform must be a string, .* \(got list"),
    bad("def_kernel-generator-none", lambda: OP.def_kernel("numba", "cpu", None),
        TypeError, r"the kernel generator must be callable \(got NoneType\)"),
    bad("def_pallas-xpu", lambda: OP.def_pallas_kernel("xpu", _noop),
        ValueError,
        r"def_pallas_kernel\(\): platform must be one of \['gpu', 'tpu', 'cpu'\]"),
    bad("def_cuda_raw-tpu", lambda: OP.def_cuda_raw_kernel(_noop, platform="tpu"),
        ValueError, r"def_cuda_raw_kernel\(\): platform must be one of"),
    bad("def_jvp_rule2-int", lambda: OP.def_jvp_rule2(3),
        TypeError, r"rule 0 must be callable or None \(got int: 3\)"),
    bad("def_jvp_rule-int", lambda: OP.def_jvp_rule(3),
        E.KernelTypeError, r"def_jvp_rule\(\): expected a function \(got int: 3\)"),
    bad("def_transpose_rule-int", lambda: OP.def_transpose_rule("t"),
        TypeError, r"def_transpose_rule\(\): expected a function \(got str"),
    bad("def_batching_rule-none", lambda: OP.def_batching_rule(None),
        TypeError, r"def_batching_rule\(\): expected a function \(got NoneType"),
    bad("def_call-int", lambda: OP.def_call(3),
        TypeError, r"def_call\(\): expected a function \(got int: 3\)"),
    bad("def_benchmark_data-list", lambda: OP.def_benchmark_data([]),
        TypeError, r"def_benchmark_data\(\): expected a function \(got list"),
    bad("def_tags-int", lambda: OP.def_tags(3),
        E.KernelTypeError, r"def_tags\(\): tags must be strings \(got int: 3\)"),
    bad("def_tags-empty", lambda: OP.def_tags(""),
        ValueError, r"tags must be non-empty strings"),
    bad("def_batch_partitioning-negative", lambda: OP.def_batch_partitioning(-1),
        ValueError, r"n_axes must be an int >= 1 \(got -1\)"),
    bad("def_sharding_rule-int", lambda: OP.def_sharding_rule(3),
        ValueError, r"a sharding rule must be a string"),
    bad("set_default-platform-list", lambda: OP.set_default(["cpu"], "jax_raw"),
        E.KernelTypeError, r"set_default\(\): platform must be a string.*got list"),
    bad("set_default-backend-int", lambda: OP.set_default("cpu", 3),
        E.KernelTypeError, r"set_default\(\): backend must be a string .*got int"),
    bad("set_default-platform-unknown", lambda: OP.set_default("xpu", "jax_raw"),
        ValueError, r"set_default\(\): platform must be one of"),
    bad("set_default-backend-unknown", lambda: OP.set_default("cpu", "warp"),
        ValueError, r"backend 'warp' is not registered for platform 'cpu'"),
    bad("get_default-platform-list", lambda: OP.get_default(["cpu"]),
        TypeError, r"get_default\(\): platform must be a string"),
    bad("available_backends-platform-int", lambda: OP.available_backends(0),
        TypeError, r"available_backends\(\): platform must be a string"),
    bad("call-outs-missing", lambda: OP(X),
        TypeError, r"missing 1 required keyword-only argument: 'outs'"),
    bad("call-outs-int", lambda: OP(X, outs=3),
        E.KernelRegistrationError, r"outs must be a jax.ShapeDtypeStruct or a "
        r"non-empty list/tuple \(or pytree\) of them, one per kernel output \(got 3\)"),
    bad("call-outs-entry-int", lambda: OP(X, outs=[F3, 3]),
        E.KernelTypeError, r"outs\[1\] must have .shape and .dtype, .* \(got int: 3\)"),
    bad("call-outs-empty", lambda: OP(X, outs=[]),
        ValueError, r"non-empty list/tuple \(or pytree\) of them, .* \(got \[\]\)"),
    bad("call-outs-shape-str", lambda: OP(X, outs=S(("a",), jnp.float32)),
        TypeError, r"outs\[0\] has shape \(.a.,\); every dimension must be an int"),
    bad("call-outs-shape-negative", lambda: OP(X, outs=S((-1,), jnp.float32)),
        ValueError, r"outs\[0\] has shape \(-1,\); dimensions must be >= 0"),
    bad("call-outs-wrong-shape", lambda: OP(X, outs=S((4,), jnp.float32)),
        E.KernelCompilationError, r"output 0: the kernel returned float32\[3\] but "
        r"`outs\[0\]` declares float32\[4\]"),
    bad("call-outs-wrong-dtype", lambda: OP(X, outs=S((3,), jnp.int32)),
        E.KernelCompilationError, r"output 0: .* `outs\[0\]` declares int32\[3\]"),
    bad("call-outs-too-many", lambda: OP(X, outs=[F3, F3]),
        E.KernelCompilationError, r"returned 1 array\(s\), expected 2"),
    bad("call-outs-too-few", lambda: TWO_OUTS(X, outs=F3),
        E.KernelCompilationError, r"returned 2 array\(s\), expected 1"),
    bad("call-keyword-reserved", lambda: OP(X, outs=F3, ins=1),
        ValueError, r"keyword 'ins' is reserved"),
    bad("call-keyword-list", lambda: OP(X, outs=F3, k=[1]),
        E.KernelTypeError, r"keyword argument 'k' must be hashable .* \(got list\)"),
    bad("call-keyword-array", lambda: OP(X, outs=F3, k=np.ones(2)),
        TypeError, r"keyword argument 'k' must be hashable .* \(got ndarray\)"),
    bad("call-keyword-dict", lambda: OP(X, outs=F3, k={"a": 1}),
        TypeError, r"keyword argument 'k' must be hashable .* \(got dict\)"),
    bad("call-keyword-jax-array", lambda: OP(X, outs=F3, k=jnp.ones(2)),
        TypeError, r"keyword argument 'k' must be hashable"),
    bad("call-backend-unknown", lambda: OP(X, outs=F3, backend="nope"),
        E.UnknownBackendError, r"backend 'nope' is not registered on any platform"),
    bad("call-backend-int", lambda: OP(X, outs=F3, backend=3),
        TypeError, r"backend must be a string or None \(got int: 3\)"),
    bad("call-input-string", lambda: OP("abc", outs=F3),
        E.KernelTypeError, r"input 0 \(str\) is not an array JAX accepts"),
    bad("call-input-ragged", lambda: OP([[1, 2], [3]], outs=F3),
        TypeError, r"input 0 \(list\) is not an array JAX accepts"),
    bad("call-input-object", lambda: OP(object(), outs=F3),
        TypeError, r"input 0 \(object\) is not an array JAX accepts"),
    bad("generator-raises", lambda: RAISES_GEN(X, outs=F3),
        E.KernelCompilationError, r"'jax_raw' kernel for platform 'cpu' failed to "
        r"build or lower \(RuntimeError: generator boom\)"),
    bad("generator-raises-jit", lambda: jax.jit(lambda x: RAISES_GEN(x, outs=F3))(X),
        E.KernelCompilationError, r"RuntimeError: generator boom"),
    bad("kernel-raises", lambda: RAISES_KERNEL(X, outs=F3),
        E.KernelCompilationError, r"\(ZeroDivisionError: kernel boom\)"),
    bad("generator-returns-int", lambda: NOT_CALLABLE(X, outs=F3),
        E.KernelCompilationError, r"the generator returned int, expected a callable"),
    bad("call-without-def_call", lambda: OP.call(X),
        ValueError, r"no call function is registered"),
    bad("benchmark-without-data", lambda: OP.benchmark(platform="cpu"),
        E.BenchmarkDataFnNotProvidedError, r"def_benchmark_data"),
]  # fmt: skip


SETTINGS = [
    bad("set_backend-platform-unknown", lambda: pk.set_backend("xpu", "numba"),
        ValueError, r"set_backend: unknown platform 'xpu'"),
    bad("set_backend-platform-list", lambda: pk.set_backend(["cpu"], "numba"),
        E.KernelTypeError, r"set_backend: platform must be a string"),
    bad("set_backend-backend-int", lambda: pk.set_backend("cpu", 3),
        TypeError, r"set_backend: backend must be a string .* \(got int: 3\)"),
    bad("get_backend-platform-list", lambda: pk.get_backend(["cpu"]),
        E.KernelTypeError, r"get_backend: platform must be a string .*got list"),
    bad("set_numba_parallel-str", lambda: pk.set_numba_parallel("yes"),
        TypeError, r"parallel must be True or False \(got str: 'yes'\)"),
    bad("set_numba_parallel-threads-zero", lambda: pk.set_numba_parallel(True, 0),
        ValueError, r"num_threads must be >= 1 \(got 0\)"),
    bad("set_numba_parallel-threads-str", lambda: pk.set_numba_parallel(True, "4"),
        TypeError, r"num_threads must be an int or None \(got str"),
    bad("set_numba_parallel-threads-huge",
        lambda: pk.set_numba_parallel(True, 10**6),
        E.KernelRegistrationError, r"num_threads must be at most \d+ "
        r"\(NUMBA_NUM_THREADS"),
    bad("set_compute_capability-junk", lambda: pk.set_compute_capability("banana"),
        ValueError, r"CUDA architecture 'banana' is not understood"),
    bad("set_compute_capability-int", lambda: pk.set_compute_capability(80),
        E.KernelTypeError, r"set_compute_capability: value must be a string .*got "
        r"int: 80"),
    bad("set_compute_capability-list-int",
        lambda: pk.set_compute_capability([80, 90]),
        TypeError, r"a list of such strings, or None \(got list"),
    bad("set_cache_dir-int", lambda: pk.set_cache_dir(3),
        TypeError, r"set_cache_dir: path must be a str, os.PathLike or None"),
    bad("set_cache_dir-empty", lambda: pk.set_cache_dir(""),
        ValueError, r"set_cache_dir: path is empty"),
    bad("get_primitive-unknown", lambda: pk.get_primitive("reliability.nope"),
        KeyError, r"no primitive named 'reliability.nope'"),
    bad("get_primitive-list", lambda: pk.get_primitive(["x"]),
        E.KernelTypeError, r"get_primitive\(name\) takes the primitive's name as a "
        r"string \(got list"),
    bad("get_primitives_by_tags-int", lambda: pk.get_primitives_by_tags(3),
        E.KernelTypeError, r"tags must be a string or an iterable of strings, got "
        r"int: 3"),
    bad("get_primitives_by_tags-int-items", lambda: pk.get_primitives_by_tags([1]),
        TypeError, r"tags must be strings, got 1"),
    bad("get_primitives_by_tags-none", lambda: pk.get_primitives_by_tags(None),
        TypeError, r"got NoneType: None"),
    bad("defjvp-not-primitive", lambda: pk.defjvp(3, None),
        TypeError, r"defjvp: expected a JAX Primitive or an XLACustomKernel, got int"),
    bad("defjvp-rule-int", lambda: pk.defjvp(OP.primitive, 3),
        E.KernelTypeError, r"rule 0 must be callable or None \(got int: 3\)"),
    bad("general_batching_rule-axis-out-of-range",
        lambda: pk.general_batching_rule(OP.primitive, [X], [5], outs=(F3,)),
        ValueError, r"operand 0 has rank 1, so its batch axis must be an int in "
        r"\[-1, 1\) or None \(got 5\)"),
    bad("general_batching_rule-axis-str",
        lambda: pk.general_batching_rule(OP.primitive, [X], ["a"], outs=(F3,)),
        ValueError, r"batch axis must be an int .* \(got 'a'\)"),
    bad("general_batching_rule-batch-sizes",
        lambda: pk.general_batching_rule(
            OP.primitive, [jnp.ones((2, 3)), jnp.ones((4, 3))], [0, 0], outs=(F3,)),
        ValueError, r"batched operands disagree on the batch size \(\[2, 4\]\)"),
    bad("general_batching_rule-arity",
        lambda: pk.general_batching_rule(OP.primitive, [X], [0, 0], outs=(F3,)),
        ValueError, r"got 1 operand\(s\) but 2 batch axes"),
    bad("general_batching_rule-prim-int",
        lambda: pk.general_batching_rule(3, [X], [0]),
        TypeError, r"prim must be a JAX Primitive, an XLACustomKernel or a callable"),
    bad("check_kernel-kernel-int", lambda: pk.testing.check_kernel(3, X, outs=F3),
        TypeError, r"kernel must be an XLACustomKernel or the name of a registered"),
    bad("check_kernel-backend-unknown",
        lambda: pk.testing.check_kernel(OP, X, outs=F3, backends=["nope"]),
        ValueError, r"backend 'nope' is not registered \(registered: \['jax_raw'\]\)"),
    bad("check_kernel-atol-negative",
        lambda: pk.testing.check_kernel(OP, X, outs=F3, atol=-1),
        ValueError, r"atol must be a number >= 0 or None \(got -1\)"),
    bad("check_kernel-reference-int",
        lambda: pk.testing.check_kernel(OP, X, outs=F3, reference=3),
        TypeError, r"reference must be a backend name, a callable or None"),
    bad("check_kernel-outs-int", lambda: pk.testing.check_kernel(OP, X, outs=3),
        ValueError, r"outs must be a jax.ShapeDtypeStruct .* \(got 3\)"),
    bad("check_kernel-outs-empty", lambda: pk.testing.check_kernel(OP, X, outs=[]),
        ValueError, r"non-empty list/tuple \(or pytree\) of them, .* \(got \[\]\)"),
    bad("check_kernel-input-str",
        lambda: pk.testing.check_kernel(OP, "abc", outs=F3),
        TypeError, r"check_kernel\('.*'\): input 0 \(str\) is not an array JAX"),
    bad("cache-prune-negative", lambda: cache_admin.prune(max_bytes=-1),
        ValueError, r"max_bytes must be a non-negative int, got -1"),
    bad("cache-prune-str", lambda: cache_admin.prune(max_bytes="a"),
        ValueError, r"max_bytes must be a non-negative int, got 'a'"),
    bad("cache-prune-age-negative", lambda: cache_admin.prune(max_age=-5),
        ValueError, r"max_age must be a non-negative number of seconds, got -5"),
    bad("tune_allocator-negative", lambda: pk.tune_allocator(mmap_threshold=-1),
        ValueError, r"mmap_threshold must be a positive number of bytes"),
]  # fmt: skip


@pytest.mark.parametrize("case", NUMBA_KERNEL)
def test_numba_kernel_bad_inputs(case):
    run_case(case)


@pytest.mark.parametrize("case", PRIMITIVE)
def test_primitive_bad_inputs(case):
    run_case(case)


@pytest.mark.parametrize("case", SETTINGS)
def test_settings_bad_inputs(case):
    run_case(case)
    # a bad setting changed nothing
    assert pk.get_backend("cpu") is None
    assert pk.get_numba_parallel() is False
