"""What the tuner captures of a call function (issue 34): the primitive's binds,
with no candidate run outside its deadline — a default that fails to build, hangs
or writes into its input cannot break, stall or touch the capture."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import polykernel as pk
from polykernel.tuning.capture import bound_calls


def _chained(name: str):
    """A primitive whose only kernel raises when built, and a call function that
    binds it twice, the second time on the first's output plus one."""
    built = []

    def broken(outs, **kw):
        built.append("numba")
        raise RuntimeError("seeded build failure")

    op = pk.XLACustomKernel(name)
    op.def_numba_kernel(broken)

    def call(x):
        out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return op(op(x, outs=out) + 1, outs=out)

    return op, call, built


def test_without_a_reference_the_binds_are_captured_on_zeros_and_nothing_runs():
    op, call, built = _chained("capture.zeros")
    x = np.arange(4, dtype=np.float32)
    first, second = bound_calls(call, (x,), op.primitive)
    np.testing.assert_array_equal(first.operands[0], x)
    np.testing.assert_array_equal(second.operands[0], np.ones(4))  # zeros + 1
    assert (first.after_zeros, second.after_zeros) == (False, True)
    assert first.statics == {} and first.params["outs"][0].shape == (4,)
    assert built == []


def test_an_evaluate_gives_the_binds_their_outputs():
    op, call, built = _chained("capture.evaluate")
    x = np.arange(4, dtype=np.float32)
    seen = []

    def evaluate(ins, params):
        seen.append(sorted(params))
        return [2 * jnp.asarray(ins[0])]

    _, second = bound_calls(call, (x,), op.primitive, evaluate)
    np.testing.assert_array_equal(second.operands[0], 2 * x + 1)
    assert not second.after_zeros and built == []
    assert seen == [["backend", "outs"], ["backend", "outs"]]


def test_an_evaluate_that_fails_falls_back_to_zeros():
    op, call, _ = _chained("capture.evaluate_fails")

    def evaluate(ins, params):
        raise RuntimeError("reference broken")

    _, second = bound_calls(
        call, (np.arange(4, dtype=np.float32),), op.primitive, evaluate
    )
    np.testing.assert_array_equal(second.operands[0], np.ones(4))
    assert second.after_zeros
