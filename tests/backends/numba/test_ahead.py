"""The handler optimised while Numba compiles the kernel (``backends/numba/ahead``):
its machine code is the code of the handler built after the compile, byte for
byte, and a kernel the guess does not fit gets the handler built after the compile.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from polykernel import numba_kernel  # noqa: E402
from polykernel.backends.numba import ahead, compile, making  # noqa: E402
from polykernel.backends.numba.artifact import link_artifact  # noqa: E402
from polykernel.backends.numba.entry import emit_kernel_call  # noqa: E402
from polykernel.backends.numba.shared import emit_handler  # noqa: E402
from polykernel.ffi.handler_ir.handler import define_handler  # noqa: E402
from polykernel.ffi.handler_ir.signature import Signature  # noqa: E402

F32, I32 = "float32", "int32"


def _csrmv(data, indices, indptr, x, out):
    for i in range(out.size):
        acc = 0.0
        for j in range(indptr[i], indptr[i + 1]):
            acc += data[j] * x[indices[j]]
        out[i] = acc


def _scaled(x, out, alpha, shift=1.0):  # an attribute, and a default left out
    for i in range(out.size):
        out[i] = alpha * x[i] + shift


def _rows(x, *outs):  # outputs as *args
    for i in range(x.shape[0]):
        outs[0][i] = x[i, 0]
        outs[1][i] = x[i, 1]


def _parallel(x, out):
    for i in numba.prange(out.size):
        out[i] = 2.0 * x[i]


CASES = {
    "csrmv": (_csrmv, {}, Signature(((F32, 1), (I32, 1), (I32, 1), (F32, 1)),
                                    ((F32, 1),), ())),
    "attr-default": (_scaled, {}, Signature(((F32, 1),), ((F32, 1),),
                                            (("alpha", F32),))),
    "star-outputs": (_rows, {}, Signature(((F32, 2),), ((F32, 1), (F32, 1)), ())),
    "parallel": (_parallel, {"parallel": True}, Signature(((F32, 1),), ((F32, 1),),
                                                          ())),
}  # fmt: skip


def _handler_code(prepared, sig, target, optimised) -> tuple[bytes, bytes]:
    """Machine code of the handler built ahead and of the one built after."""
    from numba.core.compiler_lock import global_compiler_lock

    context, gen = making.codegen()
    binding = compile.compile_prepared(prepared)
    module = gen._create_empty_module(target)
    define_handler(module, target, sig, "t", emit_kernel_call(context, binding))
    with global_compiler_lock:
        built_ahead = link_artifact(gen, optimised(binding), target,
                                    binding.cres.library)  # fmt: skip
        built_after = link_artifact(gen, module, target, binding.cres.library)
        return emit_handler(gen, built_ahead.module), emit_handler(
            gen, built_after.module
        )


def _started(case: str, prefix: str) -> tuple[str, object, ahead.Ahead]:
    """The case's kernel prepared, and its handler started ahead."""
    fn, options, sig = CASES[case]
    context, gen = making.codegen()
    target = f"{prefix}_{case.replace('-', '_')}"
    prepared = compile.prepare(numba.njit(**options)(fn), sig, {})
    started = ahead.start(context, gen, target, sig, "t", prepared)
    assert started is not None
    return target, prepared, started


@pytest.fixture
def two_cores(monkeypatch):
    """Build ahead whatever the machine running the tests has."""
    monkeypatch.setattr(ahead, "usable_cores", lambda: [0, 1])


@pytest.mark.slow  # a Numba compile per case
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_handler_built_ahead_is_the_handler_built_after_byte_for_byte(
    case, two_cores
):
    sig = CASES[case][2]
    target, prepared, started = _started(case, "pk_test_ahead")

    def optimised(binding):
        found = started.take(binding)
        assert found is not None, "the guess did not fit this kernel"
        return found.module

    built_ahead, built_after = _handler_code(prepared, sig, target, optimised)
    assert len(built_ahead) > 1000
    assert built_ahead == built_after


@pytest.mark.slow
def test_a_kernel_that_returns_a_value_is_handled_after_its_compile(two_cores):
    @numba.njit
    def returns(x, out):
        for i in range(out.size):
            out[i] = x[i] + 1.0
        return out.size  # Numba types the return: not the guessed None

    sig = Signature(((F32, 1),), ((F32, 1),), ())
    context, gen = making.codegen()
    prepared = compile.prepare(returns, sig, {})
    started = ahead.start(context, gen, "pk_test_ahead_returns", sig, "t", prepared)
    assert started is not None
    assert started.take(compile.compile_prepared(prepared)) is None
    # and the kernel still runs, its handler built after the compile
    f = numba_kernel(returns, jax.ShapeDtypeStruct((5,), jnp.float32))
    np.testing.assert_array_equal(np.asarray(f(jnp.arange(5.0))), np.arange(5.0) + 1)


def test_one_core_builds_nothing_ahead(monkeypatch):
    monkeypatch.setattr(ahead, "usable_cores", lambda: [0])
    sig = Signature(((F32, 1),), ((F32, 1),), ())
    context, gen = making.codegen()
    prepared = compile.prepare(numba.njit(_parallel), sig, {})
    assert ahead.start(context, gen, "pk_test_ahead_one", sig, "t", prepared) is None


@pytest.mark.slow  # a Numba compile per case
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_handler_object_made_ahead_is_the_one_made_after_and_links(
    case, two_cores
):
    """The handler's own object (``parts``), generated in the thread while Numba
    compiles, is the one generated after the compile from the handler built then,
    byte for byte; with the kernel's object cut from the proven artefact it links
    into a library that exports the entry only."""
    import ctypes

    import llvmlite.binding as ll
    from numba.core.compiler_lock import global_compiler_lock

    from polykernel.backends.numba.artifact import optimise_handler
    from polykernel.backends.numba.parts import (
        handler_object,
        kernel_alias,
        kernel_object,
    )
    from polykernel.backends.numba.shared import (
        link_handler,
        load_handler,
        pic_target_machine,
    )

    sig = CASES[case][2]
    context, gen = making.codegen()
    target, prepared, started = _started(case, "pk_test_parts")
    binding = compile.compile_prepared(prepared)
    found = started.take(binding)
    assert found is not None and found.handler_object is not None
    symbol = binding.cres.fndesc.mangled_name
    module = gen._create_empty_module(target)
    define_handler(module, target, sig, "t", emit_kernel_call(context, binding))
    with global_compiler_lock:
        after = ll.parse_assembly(str(module))
        after.data_layout = gen._data_layout
        optimise_handler(after, gen._tm)
        made_after = handler_object(after, target, symbol, pic_target_machine(gen))
        artefact = link_artifact(gen, found.module, target, binding.cres.library)
        assert artefact.self_contained, artefact.problems
        kernel_part = kernel_object(gen, artefact, symbol)
    assert found.handler_object == made_after
    assert kernel_part is not None
    path = link_handler([found.handler_object, kernel_part], target)
    owner, address = load_handler(path, target, artefact.environments)
    assert address
    library = ctypes.CDLL(str(path))  # already open: the same handle
    assert hasattr(library, target)
    assert not hasattr(library, kernel_alias(target))  # hidden: not exported
    del owner


def test_a_kernel_object_needs_its_kernel_in_the_artefact():
    """Cutting the kernel from an artefact that lacks it gives None (the
    artefact is then emitted as one object)."""
    from types import SimpleNamespace

    import llvmlite.binding as ll

    from polykernel.backends.numba.parts import kernel_object

    module = ll.parse_assembly('define void @"pk_entry"() {\n  ret void\n}\n')
    artefact = SimpleNamespace(module=module, entry="pk_entry", environments=[])
    _, gen = making.codegen()
    assert kernel_object(gen, artefact, "_ZN5nokernel") is None
