"""The handler optimised while Numba compiles the kernel.

A handler's IR depends on the kernel only through the kernel's declaration: the
Numba calling convention for its argument and return types, its parameter names,
its attributes and its symbol. All of that but the symbol is known before Numba
compiles the kernel, once one guess is made: that the kernel returns ``None``, as
kernels that write their outputs do. So :func:`start` builds the handler's IR before
the compile, against that declaration under a placeholder symbol, and parses and
optimises it in a thread of its own, in an LLVM context of its own, with a target
machine made as Numba makes its JIT's, then generates the handler's own object
code (:func:`.parts.handler_object`). That work (~100 ms for a five-argument
handler here) then runs beside Numba's compile on another core instead of after it.

:meth:`Ahead.take` checks the guess against the compiled kernel. When the kernel's
types, parameter names and attributes are the guessed ones, the optimised module,
its placeholder renamed to the kernel's symbol, is what optimising the handler after
the compile gives: the same IR through the same pipeline on the same target. Its
machine code is the same, byte for byte; ``tests/backends/numba/test_ahead.py``
compares the two. Otherwise the guess is dropped, and the handler is built after the
compile, as it would be without this module. The same happens where the process may
run on one core only.
"""

from __future__ import annotations

import threading
import types
from typing import Any

from ...ffi.handler_ir.signature import Signature
from ...settings.host import usable_cores
from .compile import Binding, Prepared

__all__ = ["Ahead", "OptimisedHandler", "start"]

#: The kernel's symbol in the handler built ahead (renamed to the real one).
PLACEHOLDER = "pk.kernel.ahead"


class OptimisedHandler:
    """A handler module already optimised, as bitcode of another LLVM context, and
    the handler's own object (:func:`.parts.handler_object`; None when it could not
    be made)."""

    def __init__(
        self, bitcode: bytes, kernel_symbol: str, handler_object: bytes | None = None
    ) -> None:
        self.bitcode = bitcode
        self.kernel_symbol = kernel_symbol
        self.handler_object = handler_object

    def module(self, codegen: Any) -> Any:
        """A new copy in Numba's LLVM context, calling the kernel by its symbol
        (hold Numba's compiler lock: that context is shared). This method is what
        :func:`.artifact.link_artifact` takes in place of the handler's IR."""
        import llvmlite.binding as ll

        module = ll.parse_bitcode(self.bitcode)
        module.get_function(PLACEHOLDER).name = self.kernel_symbol
        module.data_layout = codegen._data_layout
        return module


class Ahead:
    """A handler being optimised in another thread (see the module doc)."""

    def __init__(self, guess: Any, text: str, codegen: Any, entry: str) -> None:
        from .shared import pic_target_machine

        self._guess = guess
        self._bitcode: bytes | None = None
        self._object: bytes | None = None
        self._thread = threading.Thread(
            target=self._optimise, args=(text, _target_machine(codegen),
                                         codegen._data_layout, entry,
                                         pic_target_machine(codegen)),
            name="polykernel-handler-ahead", daemon=True,
        )  # fmt: skip
        self._thread.start()

    def _optimise(
        self, text: str, tm: Any, data_layout: str, entry: str, pic_tm: Any
    ) -> None:
        import llvmlite.binding as ll

        from .artifact import optimise_handler
        from .parts import handler_object

        try:
            module = ll.parse_assembly(text, context=ll.create_context())
            module.data_layout = data_layout
            optimise_handler(module, tm, run=_unlocked_run)
            self._bitcode = bytes(module.as_bitcode())
        except Exception:  # the handler is then built after the compile
            self._bitcode = None
            return
        try:  # then its machine code (the module is not needed any more)
            self._object = handler_object(module, entry, PLACEHOLDER, pic_tm,
                                          emit=_unlocked_emit)  # fmt: skip
        except Exception:  # the artefact is then emitted as one object
            self._object = None

    def take(self, binding: Binding) -> OptimisedHandler | None:
        """The optimised handler for the compiled kernel ``binding``; None when
        the guess was wrong or the optimisation failed (build it now)."""
        self._thread.join()
        fndesc = binding.cres.fndesc
        if self._bitcode is None or not _same_declaration(fndesc, self._guess):
            return None
        return OptimisedHandler(self._bitcode, fndesc.mangled_name, self._object)


def start(
    context: Any, codegen: Any, target: str, sig: Signature, label: str,
    prepared: Prepared,
) -> Ahead | None:  # fmt: skip
    """Build the handler of the kernel ``prepared`` describes and start optimising
    it; None where the process has one core or the guess cannot be made."""
    from numba.core import types as nbtypes, utils
    from numba.core.compiler_lock import global_compiler_lock

    from ...ffi.handler_ir.handler import define_handler
    from .entry import emit_kernel_call

    if len(usable_cores()) < 2:
        return None
    pysig = utils.pysignature  # pyright: ignore[reportPrivateImportUsage]
    params = pysig(prepared.dispatcher.py_func).parameters.values()
    guess = types.SimpleNamespace(
        mangled_name=PLACEHOLDER,
        argtypes=prepared.argtypes,
        restype=nbtypes.none,
        args=tuple(p.name for p in params if p.kind != p.VAR_KEYWORD),
        noalias=False,
        inline=False,
    )
    stand_in = Binding(types.SimpleNamespace(fndesc=guess), prepared.sources,
                       prepared.dispatcher)  # fmt: skip
    try:
        # Numba's compiler lock: the first IR built may load Numba's registries,
        # which its compiles otherwise load under this lock.
        with global_compiler_lock:
            module = codegen._create_empty_module(target)
            emit = emit_kernel_call(context, stand_in)
            define_handler(module, target, sig, label, emit)
    except Exception:  # built after the compile, where the same error is raised
        return None
    return Ahead(guess, str(module), codegen, target)


def _same_declaration(fndesc: Any, guess: Any) -> bool:
    """Whether the compiled kernel is declared as the guess was (the symbol
    aside): the same types, parameter names and attributes."""
    return (
        fndesc.restype == guess.restype
        and tuple(fndesc.argtypes) == tuple(guess.argtypes)
        and tuple(fndesc.args) == guess.args
        and bool(fndesc.noalias) is guess.noalias
        and bool(fndesc.inline) is guess.inline
    )


# llvmlite serialises every call into LLVM with one process-wide lock, Numba's
# compile included. The two long steps of this thread (the optimisation, ~60 ms,
# and the code generation, ~45 ms) touch only this thread's LLVM context, module,
# target machine and pass builder, which LLVM allows to be used beside other
# contexts in other threads; holding the lock through them would make Numba's
# compile wait for them instead of running beside them. So they call llvmlite's C
# functions directly (ctypes releases the GIL during the call), where llvmlite
# exposes them (``_cfn``); elsewhere through its locked wrappers.
def _raw(name: str) -> Any:
    from llvmlite.binding import ffi

    wrapper = getattr(ffi.lib, name)
    return getattr(wrapper, "_cfn", wrapper)


def _unlocked_run(mpm: Any, module: Any, pb: Any) -> None:
    """``mpm.run(module, pb)`` without llvmlite's lock (see above)."""
    _raw("LLVMPY_RunNewModulePassManager")(mpm, module, pb)


def _unlocked_emit(tm: Any, module: Any) -> bytes:
    """``tm.emit_object(module)`` without llvmlite's lock around the code
    generation (see above)."""
    import ctypes

    from llvmlite.binding import ffi

    with ffi.OutputString() as error:
        buffer = _raw("LLVMPY_TargetMachineEmitToMemory")(tm, module, 1, error)
        if not buffer:
            raise RuntimeError(str(error))
    try:
        start = ffi.lib.LLVMPY_GetBufferStart(buffer)
        return ctypes.string_at(start, ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


def _target_machine(codegen: Any) -> Any:
    """A target machine made as Numba makes its JIT's (its own: two threads never
    share one)."""
    import llvmlite.binding as ll
    from numba.core import config

    # Numba sets its settings at import (globals().update), unseen by pyright
    options: dict[str, Any] = {"opt": config.OPT}  # pyright: ignore[reportAttributeAccessIssue]
    codegen._customize_tm_options(options)
    return ll.Target.from_triple(ll.get_process_triple()).create_target_machine(
        **options
    )
