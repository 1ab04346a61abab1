"""What a backend declares for its kernels is checked when a kernel is made (issue 37).

``BackendKernel(platforms=..., parameters=...)`` refuses a bad declaration at once,
naming the kernel, its class and backend, what was given and what is allowed: a
wrong type is a ``KernelTypeError`` (a ``TypeError``), a bad value a
``KernelRegistrationError`` (a ``ValueError``), as for ``polykernel.Backend``'s
fields. A call with a keyword that an out-of-tree backend's kernel did not declare
says that the backend must declare it; a built-in backend's message is unchanged.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.contract.parameters import INFERRED, STATIC, Parameters, bind_keywords
from polykernel.platforms import Platform

T, R = pk.KernelTypeError, pk.KernelRegistrationError
SPEC = jax.ShapeDtypeStruct((3,), jnp.float32)
WHERE = re.escape(f"my_kernel 'k' ({__name__}.Plugin, backend 'my_plugin'): ")
ALLOWED = re.escape("'cpu', 'gpu', 'tpu'")
DTYPES = re.escape(
    "declare a NumPy scalar dtype name ('bool', 'int8' to 'int64', 'uint8' to "
    "'uint64', 'float16', 'float32', 'float64'), INFERRED (the value's type "
    "decides, by the backend's rule) or STATIC (any hashable value, passed as it "
    "is), both from polykernel.contract.parameters; e.g. parameters={'alpha': "
    "'float32'}."
)


class Plugin(pk.BackendKernel):
    """A kernel class of an out-of-tree backend (this module is not polykernel's)."""

    backend = "my_plugin"

    def emit(self, platform, arrays, scalars, outs):
        return [arrays[0] * 2]


def copy(x, out):
    """A Numba kernel (compiled by the test that needs it)."""
    out[:] = x


def make(**declared):
    declared.setdefault("platforms", ("cpu",))
    return Plugin("my_kernel", "k", SPEC, **declared)


# (declaration, exception, message after WHERE)
BAD = {
    "platforms_str": ({"platforms": "cpu"}, T, r"platforms must be a sequence "
                      rf"\(tuple or list\) of platform names from {ALLOWED}, got the "
                      r"string 'cpu'; write e\.g\. platforms=\('cpu',\)\.$"),
    "platforms_unknown": ({"platforms": ("fpga",)}, R, r"platforms: 'fpga' is not a "
                          rf"platform; allowed values: {ALLOWED}\.$"),
    "platforms_lowering": ({"platforms": ("cpu", "cuda")}, R,
                           rf"platforms: 'cuda' is not a platform; allowed values: "
                           rf"{ALLOWED}\.$"),
    "platforms_empty": ({"platforms": ()}, R, r"platforms is empty; a kernel has a "
                        rf"path on at least one of {ALLOWED}\.$"),
    "platforms_int": ({"platforms": 3}, T, r"platforms must be a sequence.*, got int "
                      r"3; write e\.g\. platforms=\('cpu',\)\.$"),
    "dtype_unknown": ({"parameters": {"alpha": "float99"}}, R, r"parameters: 'alpha' "
                      r"is declared with dtype 'float99', which NumPy does not know; "
                      rf"{DTYPES}$"),
    "dtype_none": ({"parameters": {"alpha": None}}, T, r"parameters: 'alpha' is "
                   r"declared with dtype None \(NoneType\), which is not a dtype; "
                   rf"{DTYPES}$"),
    "dtype_number": ({"parameters": {"alpha": 3}}, T, r"parameters: 'alpha' is "
                     r"declared with dtype 3 \(int\), which is not a dtype; "),
    "dtype_complex": ({"parameters": {"alpha": "complex64"}}, R, r"parameters: "
                      r"'alpha' is declared with dtype 'complex64': complex64 is not "
                      r"a dtype a scalar parameter can have \(bool, integers, real "
                      rf"floats\); {DTYPES}$"),
    "dtype_str": ({"parameters": {"alpha": "str"}}, R, r"parameters: 'alpha' is "
                  r"declared with dtype 'str': str is not a dtype a scalar parameter "
                  r"can have"),
    "parameters_list": ({"parameters": ["alpha"]}, T, r"parameters must be a "
                        r"mapping from each keyword parameter's name to its dtype, a "
                        r"polykernel\.contract\.parameters\.Parameters, or None \(no "
                        r"keywords\); got list \['alpha'\]\. Write e\.g\. "
                        r"parameters=\{'alpha': 'float32'\}\.$"),
    "name_not_identifier": ({"parameters": {"1x": "float32"}}, R, r"parameters: "
                            r"'1x' cannot be a keyword argument; name each parameter "
                            r"with a Python identifier, e\.g\. 'alpha'\.$"),
    "name_int": ({"parameters": {3: "float32"}}, T, r"parameters: each name must be a "
                 r"string \(the keyword a call passes\), got int 3\.$"),
    "declared_parameters_dtype": ({"parameters": Parameters.declared({"n": "f99"})},
                                  R, r"parameters: 'n' is declared with dtype 'f99', "
                                  r"which NumPy "
                                  r"does not know"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_declaration_is_refused_when_the_kernel_is_made(case):
    declared, exc, message = BAD[case]
    with pytest.raises(exc, match=f"^{WHERE}{message}"):
        make(**declared)


def test_the_two_error_classes_are_a_type_and_a_value_error():
    assert issubclass(T, TypeError) and issubclass(R, ValueError)


def test_good_declarations_are_taken_as_they_were():
    kernel = make(
        platforms=["gpu", "cpu", "gpu"],
        parameters={
            "a": "float32",
            "b": np.float32,
            "c": np.dtype("int8"),
            "d": jnp.int32,
            "e": "bool",
            "f": INFERRED,
            "g": STATIC,
        },
    )
    assert kernel.platforms == (Platform.GPU, Platform.CPU)
    assert [p.name for p in kernel.parameters.entries] == list("abcdefg")
    assert make(parameters=None).parameters == Parameters()
    declared = Parameters.declared({"n": INFERRED})
    assert make(parameters=declared).parameters is declared


def test_a_declared_parameter_still_converts_its_value():
    kernel = make(parameters={"alpha": "float32"})
    assert kernel.convert_scalars({"alpha": 2}, 1, 1) == (("alpha", np.float32(2)),)


PLUGIN = re.escape(
    "my_kernel 'k': unknown keyword argument 'alpha' (parameters: none); check the "
    "spelling. If the kernel does take 'alpha', the out-of-tree backend 'my_plugin' "
    f"({__name__}.Plugin) must declare it: pass parameters={{'alpha': 'float32'}} "
    "(a dtype name, INFERRED or STATIC) to BackendKernel.__init__ in the plugin (or "
    "report it to the plugin's authors)."
)


def test_an_undeclared_keyword_on_a_plugin_kernel_names_the_backend_to_fix():
    with pytest.raises(pk.KernelCallError, match=f"^{PLUGIN}$"):
        make()(jnp.ones(3, jnp.float32), alpha=2.0)


def test_several_undeclared_keywords_are_declared_together():
    with pytest.raises(pk.KernelCallError, match=re.escape(
        "unknown keyword arguments 'alpha', 'beta' (parameters: n: inferred); "
        "check the spelling. If the kernel does take 'alpha', 'beta', the out-of-tree "
        "backend 'my_plugin' (" + __name__ + ".Plugin) must declare them: pass "
        "parameters={'alpha': 'float32', 'beta': 'float32'}"
    )):  # fmt: skip
        make(parameters={"n": INFERRED}).convert_scalars(
            {"n": 1, "beta": 1.0, "alpha": 2.0}, 1, 1
        )


def test_a_built_in_backend_keeps_the_caller_s_message():
    # plugin=None is how a built-in backend's kernel binds (its class is ours).
    with pytest.raises(pk.KernelCallError, match=re.escape(
        "k: unknown keyword argument 'alpha' (parameters: none); pass only the "
        "kernel's parameters as keywords (check the spelling)."
    )):  # fmt: skip
        bind_keywords("k", Parameters(), ["alpha"], 1, 1)
    numba = pytest.importorskip("numba")
    with pytest.raises(pk.KernelCallError, match=re.escape(
        "numba_kernel 'copy': unknown keyword argument 'alpha' (x, out take the "
        "call's 2 arrays; parameters: none); pass only the kernel's parameters as "
        "keywords (check the spelling)."
    )):  # fmt: skip
        pk.numba_kernel(numba.njit(copy), SPEC)(jnp.ones(3, jnp.float32), alpha=2.0)


def test_a_plugin_kernel_with_its_parameter_declared_runs():
    out = make(parameters={"alpha": "float32"})(jnp.ones(3, jnp.float32), alpha=2.0)
    assert out.tolist() == [2.0, 2.0, 2.0]
