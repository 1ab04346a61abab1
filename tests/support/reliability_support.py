"""What every bad-input table shares: the row type and the usability probe.

A row is ``bad(id, call, exc, match)``: calling ``call()`` must raise ``exc`` (our
class or the builtin it subclasses) with a message matching ``match``. After each
row the test runs :func:`assert_usable`: a valid Numba-backed call, a valid
primitive call and a valid jitted call must still give the right answer.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

S = jax.ShapeDtypeStruct
F3 = S((3,), jnp.float32)


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[], Any]
    exc: type[BaseException] | tuple[type[BaseException], ...]
    match: str


def bad(id: str, call: Callable[[], Any], exc: Any, match: str) -> Any:
    """One table row as a ``pytest.param`` carrying the ``bad_input`` mark."""
    return pytest.param(Case(id, call, exc, match), id=id, marks=pytest.mark.bad_input)


def run_case(case: Case) -> None:
    """Run one row: the expected exception and message, then a usability check."""
    with pytest.raises(case.exc, match=case.match):
        result = case.call()
        jax.block_until_ready(result)  # errors of asynchronous dispatch surface here
    assert_usable()


@functools.cache
def _probe() -> tuple[Any, Any]:
    import numba

    import polykernel as pk

    @numba.njit
    def plus_one(x, out):
        for i in range(out.size):
            out[i] = x[i] + 1

    op = pk.XLACustomKernel("reliability.probe")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x * 2)
    op.def_numba_kernel(
        lambda outs, **kw: pk.numba_kernel(plus_one, outs[0]), asdefault=False
    )
    return pk.numba_kernel(plus_one, F3), op


def assert_usable() -> None:
    """A valid call of each kind still works after a bad one."""
    kernel, op = _probe()
    x = jnp.arange(3, dtype=jnp.float32)
    np.testing.assert_array_equal(kernel(x), [1, 2, 3])
    np.testing.assert_array_equal(jax.jit(lambda a: kernel(a))(x), [1, 2, 3])
    np.testing.assert_array_equal(op(x, outs=F3), [0, 2, 4])
    np.testing.assert_array_equal(op(x, outs=F3, backend="numba"), [1, 2, 3])


PROFILE_ENV = "POLYKERNEL_HYPOTHESIS_PROFILE"


def profiles() -> list[Any]:
    """``["ci", "long"]`` for parametrising property tests: the long variant is
    marked ``slow`` and runs only when the long profile is selected."""
    long = pytest.param(
        "long",
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(
                os.environ.get(PROFILE_ENV) != "long",
                reason=f"long Hypothesis profile: set {PROFILE_ENV}=long",
            ),
        ],
    )
    return ["ci", long]
