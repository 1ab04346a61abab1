"""``polykernel.Backend`` checks its fields when it is made, and ``register_backend``
registers nothing unless every field is valid.

A wrong type is a ``KernelTypeError`` (a ``TypeError``), a bad value a
``KernelRegistrationError`` (a ``ValueError``); each message names the field, what
is allowed and the fix. A refused registration leaves the name free.
"""

from __future__ import annotations

import re

import pytest

import polykernel as pk
from polykernel.platforms import Platform

pytest_plugins = ("plugin_support",)  # its fixtures: isolated_table, entry_points

T, R = pk.KernelTypeError, pk.KernelRegistrationError
ALLOWED = re.escape("'cpu', 'gpu', 'tpu'")

# (fields, exception, message)
BAD = {
    "name_empty": ({"name": ""}, R, r"^polykernel\.Backend: name '' is not a valid "
                   r"backend name; use a non-empty Python identifier"),
    "name_blank": ({"name": "   "}, R, r"name '   ' is not a valid backend name"),
    "name_dash": ({"name": "my-backend"}, R, r"name 'my-backend' is not a valid"),
    "name_none": ({"name": None}, T, r"name must be a string, a Python identifier "
                  r"such as 'my_backend'; got NoneType None\."),
    "name_int": ({"name": 5}, T, r"name must be a string.*; got int 5\."),
    "platforms_str": ({"platforms": "cpu"}, T, r"^polykernel\.Backend 'mine': "
                      r"platforms must be a sequence \(tuple or list\) of platform "
                      rf"names from {ALLOWED}, got the string 'cpu'; write e\.g\. "
                      r"platforms=\('cpu',\)\."),
    "platforms_unknown": ({"platforms": ("fpga",)}, R, r"platforms: 'fpga' is not a "
                          rf"platform; allowed values: {ALLOWED}\."),
    "platforms_lowering": ({"platforms": ("cpu", "cuda")}, R,
                           rf"'cuda' is not a platform; allowed values: {ALLOWED}"),
    "platforms_two_unknown": ({"platforms": ("fpga", 5)}, R,
                              r"'fpga', 5 are not platforms; allowed values"),
    "platforms_empty": ({"platforms": ()}, R, r"platforms is empty; a backend has "
                        rf"a path on at least one of {ALLOWED}"),
    "platforms_none": ({"platforms": None}, T, r"platforms must be a sequence.*got "
                       r"NoneType None"),
    "modules_str": ({"modules": "numpy"}, T, r"modules must be a sequence \(tuple "
                    r"or list\) of module names, got the string 'numpy'; write "
                    r"e\.g\. modules=\('numpy',\)\."),
    "modules_int": ({"modules": (5,)}, T, r"modules must hold module names "
                    r"\(strings\), got int 5"),
    "modules_bad_name": ({"modules": ("not a module",)}, R,
                         r"modules: 'not a module' is not an importable module name"),
    "pattern_bad": ({"target_pattern": "("}, R, r"target_pattern '\(' is not a "
                    r"regular expression \(missing \), unterminated subpattern"),
    "pattern_int": ({"target_pattern": 5}, T, r"target_pattern must be a regular "
                    r"expression \(a string\) or None, got int 5"),
    "reviver_no_colon": ({"target_pattern": "x_.*", "reviver": "my_pkg.revive"}, R,
                         r"reviver must be 'module:function' \(e\.g\. 'my_package"
                         r"\.revive:revive'\) or None, got 'my_pkg\.revive'"),
    "reviver_int": ({"target_pattern": "x_.*", "reviver": 5}, T,
                    r"reviver must be a string 'module:function' or None, got int 5"),
    "reviver_no_function": ({"target_pattern": "x_.*", "reviver": "my_pkg:"}, R,
                            r"reviver must be 'module:function'.*got 'my_pkg:'"),
    "reviver_no_pattern": ({"reviver": "my_pkg.revive:revive"}, R,
                           r"reviver 'my_pkg\.revive:revive' is set but "
                           r"target_pattern is None"),
    "summary_none": ({"summary": None}, T, r"summary must be a string, got NoneType"),
    "extra_empty": ({"extra": ""}, R, r"extra is an empty string; give the pip "
                    r"extra's name, or None"),
    "extra_int": ({"extra": 3}, T, r"extra must be a string or None, got int 3"),
    "reference_str": ({"reference": "yes"}, T, r"reference must be True or False, "
                      r"got str 'yes'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_field_is_refused_when_the_backend_is_made(case):
    fields, error, message = BAD[case]
    with pytest.raises(error, match=message) as info:
        pk.Backend(**{"name": "mine", **fields})
    if case == "pattern_bad":
        assert isinstance(info.value.__cause__, re.error)


def test_good_fields_are_normalised():
    b = pk.Backend(name="mine", platforms=["gpu", Platform.CPU, "gpu"],
                   modules=["numpy", "numba.cuda"], target_pattern=r"mine_\d+",
                   reviver="my_pkg.revive:revive")  # fmt: skip
    assert b.platforms == (Platform.GPU, Platform.CPU)
    assert b.modules == ("numpy", "numba.cuda")
    assert pk.Backend(name="_x2").platforms == (Platform.CPU,)


def _mutations() -> dict:
    return {
        "name": ("", R, r"name '' is not a valid backend name"),
        "platforms": ("cpu", T, r"platforms must be a sequence"),
        "modules": ("numpy", T, r"modules must be a sequence"),
        "target_pattern": ("(", R, r"target_pattern '\(' is not a regular expression"),
    }


@pytest.mark.parametrize("field", list(_mutations()))
def test_register_backend_takes_the_name_only_when_every_field_is_valid(
    isolated_table, field
):
    value, error, message = _mutations()[field]
    backend = pk.Backend(name="pk_test_fixme", target_pattern=r"pk_fixme_\d+")
    good = getattr(backend, field)
    setattr(backend, field, value)  # fields are plain attributes
    with pytest.raises(error, match=message):
        pk.register_backend(backend)
    assert pk.backends.lookup("pk_test_fixme") is None
    assert "" not in pk.backends.backend_names()
    setattr(backend, field, good)  # the corrected registration is accepted
    assert pk.register_backend(backend) is backend
    assert pk.backends.lookup("pk_test_fixme") is backend


def test_names_that_are_not_identifiers_are_never_listed(isolated_table):
    for name in ("", "   ", None, 5):
        with pytest.raises((T, R)):
            pk.register_backend(pk.Backend(name=name))
    names = pk.backends.backend_names()
    assert all(isinstance(n, str) and n.isidentifier() for n in names)
