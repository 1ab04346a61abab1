"""The one XLA target registry: every target goes through it, once, by content.

Registering is real (``jax.ffi.register_ffi_target``; XLA queries a handler's
metadata when it is registered): the handlers registered here under names no
program calls are real generated Numba handlers.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numba
import pytest

import polykernel as pk
from polykernel.ffi import targets


@numba.njit
def _double(x, out):
    out[0] = 2 * x[0]


@numba.njit
def _triple(x, out):
    out[0] = 3 * x[0]


@functools.cache
def _handlers() -> SimpleNamespace:
    """The addresses of two real handlers (they answer XLA's metadata query)."""
    addresses = []
    for body in (_double, _triple):
        kernel = pk.numba_kernel(body, jax.ShapeDtypeStruct((1,), jnp.float32))
        kernel(jnp.ones(1, jnp.float32))
        (target,) = kernel._targets.values()
        addresses.append(targets.lookup(target, "cpu").address)
    return SimpleNamespace(noop=SimpleNamespace(address=addresses[0]),
                           other=SimpleNamespace(address=addresses[1]))  # fmt: skip


def _register(name: str, address: int, identity: str, platform: str = "cpu") -> bool:
    return targets.register(name, address, platform=platform, identity=identity,
                            backend="test", label="noop")  # fmt: skip


def test_a_name_registers_once_per_platform_and_is_listed():
    assert _register("test_targets.once", _handlers().noop.address, "id-1") is True
    assert _register("test_targets.once", _handlers().noop.address, "id-1") is False
    record = targets.lookup("test_targets.once", "cpu")
    assert (record.backend, record.label, record.identity) == ("test", "noop", "id-1")
    assert "test_targets.once" in pk.list_registered_targets()
    assert targets.lookup("test_targets.once", "CUDA") is None


def test_another_identity_under_a_taken_name_is_refused_naming_both():
    _register("test_targets.taken", _handlers().noop.address, "first")
    with pytest.raises(pk.KernelRegistrationError, match=r"cannot register FFI "
                       r"target 'test_targets.taken' \(cpu\): it already names "
                       r"different content: test 'noop' \(identity "
                       r"first\)"):  # fmt: skip
        _register("test_targets.taken", _handlers().other.address, "second")


def test_the_same_name_on_another_platform_is_another_target():
    _register("test_targets.both", _handlers().noop.address, "cpu-build")
    other = _handlers().other.address
    assert _register("test_targets.both", other, "cuda-build", "cuda")
    assert targets.lookup("test_targets.both", "gpu").identity == "cuda-build"
    assert targets.names().count("test_targets.both") == 1


def test_an_unknown_platform_is_refused():
    with pytest.raises(pk.KernelRegistrationError, match="unknown platform 'tpu'"):
        _register("test_targets.tpu", _handlers().noop.address, "x", "tpu")


def test_revivers_are_found_by_name_pattern():
    seen = []
    targets.add_reviver("test", r"test_revive_[0-9]+", lambda n, p: seen.append(n) or 1)
    assert targets.revive("test_revive_42", "program") is True and seen == [
        "test_revive_42"
    ]
    assert targets.revive("test_revive_x") is None
    assert targets.reviver_for("test_revive_7")[0] == "test"


def test_every_backend_declares_its_names_to_the_registry():
    pk.backends.install_revivers()
    owners = {
        "pk_numba_" + "0" * 24: "numba",
        "pk_warp_" + "0" * 24: "warp",
        "pk_ncc_" + "0" * 24: "numba_cuda",
        "mymod.f.pk" + "0" * 16: "cuda_raw",
        "polykernel_gpu_launch": "gpu_launcher",
        "polykernel_gpu_launch_nograph": "gpu_launcher",
    }
    assert {n: targets.reviver_for(n)[0] for n in owners} == owners
    assert targets.reviver_for("mymod.f") is None  # a documented name: first build
