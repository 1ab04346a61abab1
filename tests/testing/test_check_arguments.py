"""check_kernel refuses bad arguments, and says when nothing here can be checked."""

from __future__ import annotations

import pytest
from check_kernel_support import SPEC, X, new_op

import polykernel as pk
from polykernel.testing import check_kernel


@pytest.fixture
def op():
    kernel = new_op("args")
    kernel.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
    return kernel


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"backends": ["nope"]},
            pk.KernelRegistrationError,
            r"backend 'nope' is not registered \(registered: \['jax_raw'\]\)",
        ),
        (
            {"reference": "nope"},
            pk.KernelRegistrationError,
            r"backend 'nope' is not registered",
        ),
        (
            {"backends": "jax_raw"},
            TypeError,
            r"backends must be a list of names, e\.g\. backends=\['jax_raw'\]",
        ),
        (
            {"reference": 3},
            TypeError,
            r"reference must be a backend name, a callable or None \(got int\)",
        ),
        (
            {"checks": ["vmap"]},
            ValueError,
            r"unknown check\(s\) \['vmap'\]; choose from \['abstract_eval'",
        ),
        ({"atol": -1}, ValueError, r"atol must be a number >= 0 or None \(got -1\)"),
        (
            {"linear_argnums": [3]},
            ValueError,
            r"linear_argnums entry 3 is not an input index \(the call has 1 input\)",
        ),
        (
            {"backend": "jax_raw"},
            ValueError,
            r"pass backends=\[\.\.\.\] to choose backends",
        ),
    ],
)
def test_bad_arguments_are_rejected(op, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        check_kernel(op, X, outs=SPEC, **kwargs)
    # Our classes, still the builtins callers catch (issue 27).
    if error in (TypeError, ValueError):
        assert isinstance(info.value, pk.CheckError)
    assert isinstance(info.value, pk.PolykernelError)


def test_kernel_must_be_a_primitive_or_a_registered_name(op):
    with pytest.raises(
        pk.CheckTypeError, match=r"kernel must be an XLACustomKernel or the name"
    ):
        check_kernel(3, X, outs=SPEC)
    assert check_kernel(op.name, X, outs=SPEC, checks=["determinism"]).ok


def test_no_kernel_for_a_present_platform_is_reported(no_gpu):
    gpu_only = new_op("gpu_only")
    gpu_only.def_kernel("jax_raw", "gpu", lambda outs, **kw: lambda x: x)
    with pytest.raises(
        pk.KernelNotAvailableError,
        match=r"no selected backend is registered on a platform present here",
    ):
        check_kernel(gpu_only, X, outs=SPEC)
