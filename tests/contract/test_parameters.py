"""A kernel's declared parameters and how a call's keywords are bound to them.

The conformance table (``test_conformance.py``) runs these rules through every
backend; here are the declarations themselves: functions read by their signature
(leading arrays, defaults, keyword-only parameters, ``*args``/``**kwargs``), and the
one message shape of a missing or unknown keyword.
"""

from __future__ import annotations

import pytest

import polykernel as pk
from polykernel.contract.parameters import (
    INFERRED,
    STATIC,
    Parameter,
    Parameters,
    bind_keywords,
)


def kernel(x, out, alpha, n=3, *, flag):
    """A Numba-style kernel: arrays first, then its keyword parameters."""


def test_a_function_declares_its_parameters_after_the_arrays():
    p = Parameters.of_function(kernel, leading="buffers")
    assert [q.name for q in p.for_call(1, 1)] == ["alpha", "n", "flag"]
    assert [q.name for q in p.for_call(0, 1)] == ["out", "alpha", "n", "flag"]
    assert p.for_call(1, 1)[1] == Parameter("n", INFERRED, optional=True)
    assert p.for_call(1, 1)[2].positional is False  # never takes an array
    assert [q.name for q in p.for_call(3, 1)] == ["flag"]  # too many: not ours


def test_inputs_alone_lead_when_the_outputs_are_returned():
    p = Parameters.of_function(lambda x, alpha: x, leading="inputs", dtype=STATIC)
    assert p.for_call(1, 5) == (Parameter("alpha", STATIC),)


def test_star_args_and_var_keywords():
    def body(*refs, scale, **extra):
        pass

    open_ = Parameters.of_function(body, leading="buffers", accept_var_keyword=True)
    assert open_.star and open_.open
    bound = bind_keywords("k", open_, ["scale", "other"], 2, 1)
    assert bound["other"].dtype is STATIC
    closed = Parameters.of_function(body, leading="buffers")
    with pytest.raises(pk.KernelCallError, match="unknown keyword argument 'other'"):
        bind_keywords("k", closed, ["scale", "other"], 2, 1)


def test_an_unreadable_signature_takes_any_keyword():
    p = Parameters.of_function(max, leading="buffers")  # a builtin: no signature
    assert p.open and bind_keywords("k", p, ["anything"], 1, 1)


def test_missing_and_unknown_keywords_have_one_message_shape_each():
    p = Parameters.declared({"alpha": "float32", "n": INFERRED}, optional={"n"})
    with pytest.raises(pk.KernelCallError, match=r"^k: missing keyword argument "
                       r"'alpha' \(parameters: alpha: float32, n: inferred "
                       r"\(optional\)\); pass it as a keyword\.$"):  # fmt: skip
        bind_keywords("k", p, [], 1, 1)
    with pytest.raises(pk.KernelCallError, match=r"^k: unknown keyword arguments "
                       r"'beta', 'gamma' \(parameters: alpha: float32, n: inferred "
                       r"\(optional\)\); pass only the kernel's parameters as "
                       r"keywords \(check the spelling\)\.$"):  # fmt: skip
        bind_keywords("k", p, ["alpha", "gamma", "beta"], 1, 1)
    f = Parameters.of_function(kernel, leading="buffers")
    with pytest.raises(TypeError, match=r"missing keyword arguments 'alpha', 'flag' "
                       r"\(x, out take the call's 2 arrays; parameters: alpha: "
                       r"inferred, n: inferred \(optional\), flag: inferred\); pass "
                       r"them as keywords\."):  # fmt: skip
        bind_keywords("numba_kernel 'kernel'", f, [], 1, 1)


def test_a_kernel_without_parameters_lists_none():
    with pytest.raises(pk.KernelCallError, match=r"unknown keyword argument 'a' "
                       r"\(parameters: none\)"):  # fmt: skip
        bind_keywords("k", Parameters(), ["a"], 1, 1)
