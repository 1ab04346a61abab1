"""The shared-object handler as two objects: the handler's own and the kernel's.

Most of a handler's object code is the handler: its generic decoding of XLA's
call frame is ~1,500 lines of optimised IR, and generating its machine code takes
~45 ms here, against ~6 ms for a CSR mat-vec kernel. The handler does not depend
on the kernel beyond the kernel's declaration, so :mod:`.ahead` generates it while
Numba compiles the kernel (:func:`handler_object`), and only the kernel's object
is left for after the compile (:func:`kernel_object`). The C compiler driver links
the two into one shared object, as it links one.

They meet at one symbol, the kernel's **alias** ``<entry>.kernel``: the handler
object declares it, the kernel object defines it, with hidden visibility, so the
link resolves the call inside the library and the library exports nothing but the
entry (and Numba environments, as before). Everything else in either object is
internal. Each object is checked as the single one was
(:func:`.artifact.containment_problems`), and the kernel's is cut from the
artefact module already proven whole (:func:`.artifact.link_artifact`): the same
code, its handler left out. Where either object cannot be made, the artefact is
emitted as one object, as before.
"""

from __future__ import annotations

from typing import Any

__all__ = ["handler_object", "kernel_alias", "kernel_object"]


def kernel_alias(entry: str) -> str:
    """The name under which the handler object calls the kernel object."""
    return f"{entry}.kernel"


def handler_object(
    module: Any, entry: str, kernel_symbol: str, tm: Any, emit: Any = None
) -> bytes | None:
    """The handler's object from its optimised module (changed in place): the call
    to ``kernel_symbol`` renamed to the alias, everything but ``entry`` internal,
    Numba's helpers renamed to the runtime library's; None when the module is not
    self-contained. ``tm``: a position-independent target machine of this thread;
    ``emit(tm, module)`` generates the code (default: ``tm.emit_object``)."""
    from .artifact import containment_problems, internalise_all_but
    from .rewrite import use_runtime

    kernel = module.get_function(kernel_symbol)
    kernel.name = kernel_alias(entry)
    kernel.visibility = "hidden"  # defined in this library: a direct call
    internalise_all_but(module, (entry,), tm)
    use_runtime(module)
    if containment_problems(module, entry):
        return None
    return bytes(tm.emit_object(module) if emit is None else emit(tm, module))


def kernel_object(codegen: Any, artefact: Any, kernel_symbol: str) -> bytes | None:
    """The kernel's object, cut from the proven artefact module (a copy): the
    kernel function under the alias, hidden; the entry and the rest of the handler
    dropped. None when the module has no such kernel or the cut is not
    self-contained."""
    import llvmlite.binding as ll

    from .artifact import containment_problems, internalise_all_but
    from .rewrite import use_runtime
    from .shared import pic_target_machine

    entry = artefact.entry
    copy = ll.parse_bitcode(artefact.module.as_bitcode())
    try:
        kernel = copy.get_function(kernel_symbol)
    except NameError:
        return None
    alias = kernel_alias(entry)
    kernel.name = alias
    kernel.linkage = "external"
    kernel.visibility = "hidden"
    copy.get_function(entry).linkage = "internal"
    envs = tuple(name for name, _ in artefact.environments)
    tm = pic_target_machine(codegen)
    internalise_all_but(copy, (alias, *envs), tm)
    use_runtime(copy)
    if containment_problems(copy, entry, exported=(alias,)):
        return None
    return bytes(tm.emit_object(copy))
