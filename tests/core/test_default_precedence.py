"""Backend precedence: per-call > set_default > persisted tuned > registration."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.settings import tuned_defaults

_ids = itertools.count()
SPEC = jax.ShapeDtypeStruct((3,), jnp.float32)


@pytest.fixture
def config_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


def make_op(name):
    op = pk.XLACustomKernel(name)
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: x + 1)
    op.def_kernel("fast", "cpu", lambda outs, **kw: lambda x: x + 2)
    return op


def test_persisted_default_applies_on_first_use_and_yields_to_overrides(config_dir):
    name = f"test.precedence.op{next(_ids)}"
    tuned_defaults.save_defaults({name: {"cpu": "fast"}})
    op = make_op(name)
    x = jnp.zeros(3, jnp.float32)
    assert op.get_default("cpu") == "fast"
    np.testing.assert_allclose(op(x, outs=SPEC), 2.0)
    np.testing.assert_allclose(op(x, outs=SPEC, backend="jax_raw"), 1.0)
    op.set_default("cpu", "jax_raw")
    np.testing.assert_allclose(op(x, outs=SPEC), 1.0)
    assert op.defaults == {"cpu": "jax_raw"}


def test_persisted_backend_not_registered_is_ignored(config_dir):
    name = f"test.precedence.op{next(_ids)}"
    tuned_defaults.save_defaults({name: {"cpu": "warp", "gpu": "triton"}})
    op = make_op(name)
    assert op.get_default("cpu") == "jax_raw"
    assert op.get_default("gpu") is None


def test_nothing_persisted_keeps_registration_default(config_dir):
    op = make_op(f"test.precedence.op{next(_ids)}")
    assert op.get_default("cpu") == "jax_raw"
    assert not config_dir.exists()
