"""Process-wide ``set_backend``: its place in the precedence chain, eager and jitted.

per-call ``backend=`` > ``set_backend`` (if registered for the primitive) >
``set_default`` > tuned entry > saved default > ``asdefault`` / first registered.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dispatch_support import entry

import polykernel as pk
from polykernel import _jax_compat
from polykernel.dispatch import Scope
from polykernel.dispatch.writing import record_entries

_ids = itertools.count()
SPEC = jax.ShapeDtypeStruct((3,), jnp.float32)
X = jnp.zeros(3, jnp.float32)


@pytest.fixture(autouse=True)
def no_global_backend():
    pk.clear_backends()
    yield
    pk.clear_backends()


@pytest.fixture
def config_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def make_op(name=None):
    """cpu backends: jax_raw -> x+1 (first registered), fast -> x+2, other -> x+3."""
    op = pk.XLACustomKernel(name or f"test.set_backend.op{next(_ids)}")
    for backend, shift in (("jax_raw", 1.0), ("fast", 2.0), ("other", 3.0)):
        op.def_kernel(backend, "cpu", lambda outs, s=shift, **kw: lambda x: x + s)
    return op


def value(fn):
    result = np.asarray(fn(X))
    assert np.all(result == result[0])
    return float(result[0])


def test_full_precedence_chain_eager_and_already_jitted(config_dir):
    op = make_op()
    record_entries([entry(op, None, "other", {}, scope=Scope.SAVED)])
    jitted = jax.jit(lambda x: op(x, outs=SPEC))
    pinned = jax.jit(lambda x: op(x, outs=SPEC, backend="jax_raw"))
    eager = lambda x: op(x, outs=SPEC)  # noqa: E731
    assert value(jitted) == value(eager) == 3.0  # saved beats first registered
    op.set_default("cpu", "jax_raw")
    assert value(jitted) == value(eager) == 1.0  # set_default beats saved
    pk.set_backend("cpu", "fast")
    assert value(jitted) == value(eager) == 2.0  # set_backend beats set_default
    assert value(pinned) == 1.0  # per-call beats set_backend
    assert value(lambda x: op(x, outs=SPEC, backend="other")) == 3.0
    pk.set_backend("cpu", None)
    assert value(jitted) == value(eager) == 1.0  # back to set_default


def test_set_backend_reaches_functions_jitted_before_it():
    op = make_op()
    f = jax.jit(lambda x: op(x, outs=SPEC))
    assert value(f) == 1.0
    pk.set_backend("cpu", "other")
    assert value(f) == 3.0
    pk.clear_backends()
    assert value(f) == 1.0
    assert pk.get_backend("cpu") is None


def test_unregistered_global_backend_warns_once_and_falls_through():
    op = make_op()
    op.set_default("cpu", "fast")
    pk.set_backend("cpu", "warp")
    with pytest.warns(
        pk.BackendPreferenceWarning,
        match=r"set_backend\('cpu', 'warp'\) does not apply to XLACustomKernel "
        r"'test.set_backend.op\d+': it registered \['jax_raw', 'fast', 'other'\] "
        r"for 'cpu'. Using 'fast' instead \(set_default; warned once\)",
    ):
        assert value(lambda x: op(x, outs=SPEC)) == 2.0
    # Warned once: a second lowering (new shape) passes silently (warnings are errors).
    assert (
        jax.jit(lambda x: op(x, outs=jax.ShapeDtypeStruct((4,), x.dtype)))(
            jnp.zeros(4)
        ).tolist()
        == [2.0] * 4
    )


def test_global_backend_applies_only_where_registered():
    with_fast, without = (
        make_op(),
        pk.XLACustomKernel(f"test.set_backend.x{next(_ids)}"),
    )
    without.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: x - 1)
    pk.set_backend("cpu", "fast")
    assert value(lambda x: with_fast(x, outs=SPEC)) == 2.0
    with pytest.warns(pk.BackendPreferenceWarning, match="does not apply"):
        assert value(lambda x: without(x, outs=SPEC)) == -1.0
    # A choice for another platform leaves cpu alone.
    pk.set_backend("cpu", None)
    pk.set_backend("gpu", "fast")
    assert value(lambda x: with_fast(x, outs=SPEC)) == 1.0


def test_reference_spellings_config_and_top_level():
    assert pk.config.set_backend is pk.set_backend
    assert pk.config.get_backend is pk.get_backend
    assert pk.config.clear_backends is pk.clear_backends
    pk.config.set_backend("gpu", "warp")
    assert pk.get_backend("gpu") == "warp"
    pk.config.clear_backends()
    assert pk.config.get_backend("gpu") is None


def test_setting_the_same_value_does_not_invalidate_jitted_code():
    epoch = _jax_compat._epoch()
    pk.set_backend("cpu", "fast")
    before = epoch.get_global()
    pk.set_backend("cpu", "fast")
    pk.set_backend("tpu", None)  # nothing to clear
    assert epoch.get_global() == before
    pk.clear_backends()
    assert epoch.get_global() == before + 1
    pk.clear_backends()
    assert epoch.get_global() == before + 1


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (("cpu", ""), ValueError, "backend cannot be an empty string"),
        (("cuda", "x"), ValueError, r"unknown platform 'cuda'; expected one of"),
        (("cpu", 3), TypeError, r"backend must be a string .* \(got int: 3\)"),
        ((None, "x"), TypeError, r"platform must be a string, one of \['cpu'"),
    ],
)
def test_set_backend_argument_errors(args, error, message):
    with pytest.raises(error, match=message):
        pk.set_backend(*args)
    assert pk.get_backend("cpu") is None
