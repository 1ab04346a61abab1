"""Entries know their kernel: an entry measured on other code, or other versions,
is stale — reported by ``explain_dispatch`` and ``polykernel tune --show``, never
used — and the identity is the same in every process for the same code."""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from dispatch_support import entry, spec

import polykernel as pk
from polykernel.dispatch import identity
from polykernel.dispatch.identity import generator_digest, kernel_identity
from polykernel.dispatch.writing import record_entries

_ids = itertools.count()

KERNELS = '''
import jax.numpy as jnp

SCALE = {scale}


def helper(x):
    return x * SCALE


def generator(outs, block, **kw):
    return lambda x: helper(x) + 0 * block
'''


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def _module(tmp_path, scale: float, name: str | None = None):
    """A module of kernels written to a file (so its source can be read)."""
    name = name or f"pk_identity_kernels_{next(_ids)}"
    path = tmp_path / f"{name}.py"
    path.write_text(KERNELS.format(scale=scale))
    spec_ = importlib.util.spec_from_file_location(name, path)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def _op(generator) -> pk.XLACustomKernel:
    op = pk.XLACustomKernel(f"identity.op{next(_ids)}")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_kernel("numba", "cpu", generator, tune={"block": [1, 2]})
    return op


def test_an_entry_of_the_same_code_is_used(tmp_path):
    op = _op(_module(tmp_path, 2.0).generator)
    record_entries([entry(op, (10,), "numba", {"block": 2})])
    d = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (d.backend, dict(d.params), d.reason, d.stale) == (
        "numba", {"block": 2}, "exact", ())  # fmt: skip


def test_an_edited_kernel_makes_its_entries_stale_reported_and_never_used(tmp_path):
    before = _module(tmp_path, 2.0, "pk_identity_edit_a")
    op = _op(before.generator)
    record_entries([entry(op, (10,), "numba", {"block": 2})])
    # The kernel's helper is edited (the generator's own text is unchanged).
    after = _module(tmp_path, 3.0, "pk_identity_edit_b")
    op.def_kernel("numba", "cpu", after.generator, tune={"block": [1, 2]})
    d = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (d.backend, d.reason) == ("jax_raw", "default")
    ((_, why),) = d.stale
    assert why == "the 'numba' kernel changed since it was measured"
    assert "1 stale entry not used" in str(d)
    (explained,) = pk.explain_dispatch(
        lambda x: op(x, outs=spec()), spec(), platform="cpu"
    )
    assert explained.stale and explained.reason == "default"
    # What runs is the default, correct for the new code.
    out = jax.jit(lambda x: op(x, outs=spec()))(jnp.ones(1000))
    assert float(out[0]) == 2.0


def test_an_upgraded_package_makes_entries_stale(tmp_path, monkeypatch):
    module = _module(tmp_path, 2.0)
    spec_ = (("block", (1, 2)),)
    now = kernel_identity(module.generator, spec_, ("numba",))
    monkeypatch.setattr(identity, "_version_of", lambda m: "0.0.0-older")
    older = kernel_identity(module.generator, spec_, ("numba",))
    assert older != now
    assert kernel_identity(module.generator, spec_, ()) == kernel_identity(
        module.generator, spec_, ()
    )


def test_launch_parameters_and_their_candidates_are_part_of_the_identity(tmp_path):
    gen = _module(tmp_path, 2.0).generator
    one = kernel_identity(gen, (("block", (1, 2)),))
    assert one != kernel_identity(gen, (("block", (1, 2, 4)),))
    assert one != kernel_identity(gen, (("block", (2, 1)),))  # another default
    assert one == kernel_identity(gen, (("block", (1, 2)),))


def test_what_the_generator_reaches_is_digested(tmp_path):
    a, b = _module(tmp_path, 2.0), _module(tmp_path, 2.0)
    assert generator_digest(a.generator) == generator_digest(b.generator)
    assert generator_digest(a.generator) != generator_digest(
        _module(tmp_path, 2.5).generator
    )

    def closure_over(value):
        def gen(outs, **kw):
            return lambda x: x * value

        return gen

    assert generator_digest(closure_over("a")) != generator_digest(closure_over("b"))
    assert generator_digest(closure_over(1)) == generator_digest(closure_over(1))


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from polykernel.dispatch.identity import kernel_identity
    import pk_identity_child as m
    print(kernel_identity(m.generator, (("block", (1, 2)),), ("numba",)))
    """
)


@pytest.mark.slow
def test_the_identity_is_the_same_in_every_process(tmp_path, run_env):
    _module(tmp_path, 2.0, "pk_identity_child")
    found = {
        subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path)], env=run_env,
            capture_output=True, text=True, check=True, timeout=120,
        ).stdout.strip()
        for _ in range(2)
    }  # fmt: skip
    assert len(found) == 1 and len(found.pop()) == 16
