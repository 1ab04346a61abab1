"""``numba_cuda_callable`` targets in a new process: the function, found by name.

A callable's handler runs the user's Python function, so a new process needs that
function. Its target name (``pk_ncc_<24 hex>``) is a digest of the function's module,
qualified name and code; when it is registered, the module and name are noted in the
cache (:mod:`.naming`). :func:`revive` finds the function in the already imported module
(polykernel never imports user code on its own), checks that its code still hashes
to the name, and registers the handler — or says which module to import.
"""

from __future__ import annotations

from typing import Any

from ...errors import KernelNotAvailableError
from .callable import register_callable
from .naming import callable_target, read_note

__all__ = ["revive"]


def revive(target: str, program: str = "") -> bool:
    """Register callable target ``target`` for the function it names.

    Raises:
        KernelNotAvailableError: the module defining the function is not imported,
            or no longer defines it with the same code.
    """
    import sys

    del program
    note = read_note(target)
    if note is None:
        return False
    module_name, qualname = note
    module = sys.modules.get(module_name)
    fn: Any = module
    for part in qualname.split(".") if module is not None else ():
        fn = getattr(fn, part, None)
    if module is None or fn is None or callable_target(fn)[0] != target:
        state = (
            "is not imported" if module is None
            else f"does not define '{qualname}' with the code that was exported"
        )  # fmt: skip
        raise KernelNotAvailableError(
            f"polykernel.load_exported: FFI target '{target}' runs the "
            f"numba_cuda_callable function '{qualname}' of module '{module_name}', "
            f"which {state} in this process. Import '{module_name}' (the version "
            f"that exported the program) before load_exported."
        )
    register_callable(fn)
    return True
