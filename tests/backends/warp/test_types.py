"""pk.jaxtype_to_warptype / pk.jaxinfo_to_warpinfo: every Warp dtype, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk

wp = pytest.importorskip("warp")

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "uint64", "float16", "float32", "float64"]  # fmt: skip


@pytest.mark.parametrize("name", DTYPES)
def test_every_warp_dtype_maps_to_its_warp_scalar(name):
    assert pk.jaxtype_to_warptype(np.dtype(name)) is getattr(wp, name)
    assert pk.jaxtype_to_warptype(name) is getattr(wp, name)


def test_jax_dtype_objects_are_accepted():
    assert pk.jaxtype_to_warptype(jnp.float32) is wp.float32
    assert pk.jaxtype_to_warptype(jnp.int64) is wp.int64


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 3, 4), (1, 2, 3, 4)])
def test_jaxinfo_gives_an_array_type_of_matching_dtype_and_rank(shape):
    t = pk.jaxinfo_to_warpinfo(jax.ShapeDtypeStruct(shape, jnp.uint16))
    assert t.ndim == len(shape)
    assert t.dtype is wp.uint16


def test_jaxinfo_accepts_arrays_and_is_usable_as_a_kernel_annotation():
    t = pk.jaxinfo_to_warpinfo(np.zeros((3,), np.float64))
    assert t.dtype is wp.float64 and t.ndim == 1
    assert pk.jaxinfo_to_warpinfo(jax_info=np.zeros((2, 2), np.int8)).ndim == 2


@pytest.mark.parametrize("zero_d", [jax.ShapeDtypeStruct((), jnp.float32),
                                    np.float32(1.0)])  # fmt: skip
def test_jaxinfo_refuses_0d_with_a_value_error_as_the_reference(zero_d):
    with pytest.raises(ValueError, match=r"jaxinfo_to_warpinfo: jax_info has shape "
                       r"\(\), but Warp arrays have 1 to 4 dimensions\. Pass a 0-d "
                       r"value as a shape-\(1,\) array"):  # fmt: skip
        pk.jaxinfo_to_warpinfo(zero_d)
    with pytest.raises(pk.UnsupportedShapeError):  # also our TypeError
        pk.jaxinfo_to_warpinfo(zero_d)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.complex64, np.complex128])
def test_a_dtype_warp_lacks_is_a_value_error_naming_it_and_the_supported(dtype):
    name = np.dtype(dtype).name
    with pytest.raises(ValueError, match=f"Warp has no dtype {name}; Warp supports "
                       "bool, int8, uint8.*float16, float32, float64"):  # fmt: skip
        pk.jaxtype_to_warptype(dtype)
    with pytest.raises(TypeError, match=f"Warp has no dtype {name}"):  # as before
        pk.jaxtype_to_warptype(dtype)
    with pytest.raises(pk.KernelTypeError, match=f"Warp has no dtype {name}"):
        pk.jaxinfo_to_warpinfo(jax.ShapeDtypeStruct((2,), dtype))


@pytest.mark.parametrize("bad", [3, np.float32, jnp.float32, "f4"])
def test_jaxinfo_refuses_what_does_not_describe_an_array(bad):
    with pytest.raises(pk.KernelTypeError, match=r"jaxinfo_to_warpinfo: jax_info must "
                       r"describe an array \(an object with \.shape and \.dtype.*For a "
                       r"dtype alone use jaxtype_to_warptype"):  # fmt: skip
        pk.jaxinfo_to_warpinfo(bad)


def test_jaxinfo_refuses_rank_above_four():
    with pytest.raises(TypeError, match=r"has shape \(1, 1, 1, 1, 1\), but Warp arrays "
                       r"have 1 to 4 dimensions\. Reshape"):  # fmt: skip
        pk.jaxinfo_to_warpinfo(jax.ShapeDtypeStruct((1,) * 5, jnp.float32))


PROBE = """
import sys
sys.modules["warp"] = None  # makes `import warp` raise ImportError
import jax, jax.numpy as jnp
import polykernel as pk
for call in (lambda: pk.jaxtype_to_warptype(jnp.float32),
             lambda: pk.jaxinfo_to_warpinfo(jax.ShapeDtypeStruct((2,), jnp.float32)),
             lambda: pk.warp_kernel(None, jax.ShapeDtypeStruct((2,), jnp.float32))):
    try:
        call()
    except ImportError as err:
        print(type(err).__name__, "|", err)
"""


def test_without_warp_every_helper_raises_import_error_naming_the_extra():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line.startswith("BackendUnavailableError | polykernel warp backend")
        assert "pip install 'polykernel[warp]'" in line
