"""A handler XLA would refuse is refused before XLA sees it, without starting JAX.

``ffi.targets.register`` asks a handler XLA's own metadata query while no JAX
backend has started (XLA would only check it when one starts, and a bad handler then
breaks every JAX operation); once a backend exists, XLA's refusal is our error. The
handlers here are ctypes callbacks that answer the query as told.
"""

from __future__ import annotations

import ctypes
import textwrap
from pathlib import Path

import pytest
from subprocess_support import SUPPORT, run_python

from polykernel.errors import KernelRegistrationError
from polykernel.ffi import abi, targets

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def answering(major: int | None, minor: int = 0) -> object:
    """A handler answering the metadata query with ``major.minor`` (None: silence)."""
    lay = abi.layout()

    @_HANDLER
    def handler(frame: int) -> int:
        ext = ctypes.c_void_p.from_address(frame + lay["FRAME_EXTENSION"]).value
        if ext and major is not None:
            md = ctypes.c_void_p.from_address(ext + lay["METADATA_EXT_METADATA"]).value
            ctypes.c_int32.from_address(md + lay["METADATA_MAJOR"]).value = major
            ctypes.c_int32.from_address(md + lay["METADATA_MINOR"]).value = minor
        return 0

    return handler


def _address(handler: object) -> int:
    return ctypes.cast(handler, ctypes.c_void_p).value or 0


@pytest.mark.parametrize(
    ("version", "shown"),
    [((None, 0), "0.0"), ((0, 0), "0.0"), ((0, 99), "0.99"), ((1, 1), "1.1")],
)
def test_a_handler_with_a_version_xla_refuses_is_refused(version, shown):
    major, minor = abi.installed_api_version()
    handler = answering(*version)
    with pytest.raises(
        KernelRegistrationError,
        match=rf"FFI target 'admission.bad' \(user 'bad'\): the handler answers XLA's "
        rf"metadata query with FFI API version {shown}, but this jaxlib accepts "
        rf"{major}\.1 to {major}\.{minor}; rebuild it",
    ):
        targets.check_handler(
            "polykernel.ffi: FFI target 'admission.bad' (user 'bad')", _address(handler)
        )


@pytest.mark.parametrize("minor", [1, 3])
def test_a_handler_answering_an_accepted_version_passes(minor):
    targets.check_handler("x", _address(answering(0, minor)))


def test_a_handler_that_errs_on_the_query_is_refused():
    @_HANDLER
    def failing(frame: int) -> int:
        return 1  # an XLA_FFI_Error*: any non-null pointer

    with pytest.raises(KernelRegistrationError, match=r"^w: .*refused the metadata"):
        targets.check_handler("w", _address(failing))


def test_once_jax_runs_xlas_refusal_is_our_error():
    import jax

    jax.devices("cpu")  # a backend exists: XLA checks the handler itself
    handler = answering(0, 99)
    with pytest.raises(
        KernelRegistrationError,
        match=r"FFI target 'admission.late' \(user 'late'\): XLA refused the handler "
        r"on cpu: .*0\.99",
    ):
        targets.register(
            "admission.late",
            _address(handler),
            platform="cpu",
            identity="late",
            backend="user",
            label="late",
            owner=handler,
        )
    assert targets.lookup("admission.late") is None


def test_before_jax_runs_a_bad_handler_neither_registers_nor_starts_jax(run_env):
    code = textwrap.dedent(
        """
        import sys
        sys.path[:0] = %r
        from test_handler_admission import answering, _address
        from polykernel.errors import KernelRegistrationError
        from polykernel.ffi import targets
        from jax._src import xla_bridge
        bad = answering(0, 99)
        try:
            targets.register("admission.early", _address(bad), platform="cpu",
                             identity="early", backend="user", owner=bad)
        except KernelRegistrationError as err:
            print("refused:", "0.99" in str(err))
        print("started:", xla_bridge.backends_are_initialized())
        import jax, jax.numpy as jnp
        jax.config.update("jax_num_cpu_devices", 2)
        print("devices:", jax.device_count(), "sum:", int(jnp.arange(4).sum()))
        print("listed:", targets.lookup("admission.early") is not None)
        """
    ) % [str(Path(__file__).parent), str(SUPPORT)]
    out = run_python(code=code, env={**run_env, "JAX_PLATFORMS": "cpu"})
    assert out.split() == [
        "refused:", "True", "started:", "False", "devices:", "2", "sum:", "6",
        "listed:", "False",
    ]  # fmt: skip
