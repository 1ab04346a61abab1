"""Turn a handler's IR plus the kernel's module into one self-contained object file.

:func:`link_artifact` links the compiled kernel's LLVM module into the handler's,
gives every function and global except the handler entry internal linkage, drops
what the entry cannot reach and names Numba's threading functions instead of
holding their addresses (:func:`.rewrite.name_threading_functions`). Nothing
inside can then be preempted by, or resolve to, another kernel's code: Numba's
symbol names (``qualname$uid``) are per process, and a cached object that
exported them could be weak-merged with a different kernel in a later process
(numba/numba#10486).

:func:`containment_problems` is the proof obligation before an object may be
cached: no dynamic globals or baked-in addresses, no Numba environment, no
reference to a Numba-mangled symbol defined elsewhere. What remains external are
C functions found by name in any process (CPython, Numba's C helpers, libc).

:func:`load_object` loads an object into Numba's JIT engine the way Numba's own
cache does, and returns the entry address: the path of a handler that cannot be a
shared object (no C compiler to link it, or code only Numba's JIT can resolve);
:mod:`.shared` is the other.

Numba environments. Code that may box values for Python (the arguments of an
exception raised with run-time values, ``print``; Numba's own ``np.empty`` checks
its shape that way) reads a per-function ``Environment`` through a global, after
a null check that turns a missing one into a clean error. An environment holding
no constants carries nothing compiled into it, so such a global is exported under
a name unique to the artefact (``<entry>.env<i>``) and pointed at a fresh
``Environment`` when the object is loaded, as Numba's own cache rebuilds it. An
environment with constants (objects baked in at compile time) is not cacheable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .rewrite import name_threading_functions

__all__ = [
    "Artifact",
    "containment_problems",
    "external_symbols",
    "internalise_all_but",
    "link_artifact",
    "load_object",
    "unresolved",
]

_ADDRESS = re.compile(r"inttoptr \(i(?:32|64) -?\d+ to")
_OPT_LEVEL = 2  # for the handler's own functions; the kernel is optimised already


@dataclass
class Artifact:
    """A linked handler module and what was proven about it."""

    module: Any  # llvmlite.binding.ModuleRef
    entry: str
    problems: list[str] = field(default_factory=list)
    # (exported symbol, module name) of each Numba environment the code reads
    environments: list[tuple[str, str]] = field(default_factory=list)

    @property
    def self_contained(self) -> bool:
        return not self.problems


def _pass_builder(tm: Any, speed: int) -> Any:
    import llvmlite.binding as ll

    pto = ll.create_pipeline_tuning_options(speed_level=speed)
    pto.loop_vectorization = speed >= 2
    pto.slp_vectorization = speed >= 2
    return ll.create_pass_builder(tm, pto)


def optimise_handler(module: Any, tm: Any, run: Any = None) -> None:
    """The full pipeline (vectorisers included) over the handler's own module,
    before the kernel is linked in: the kernel is optimised already. ``run(mpm,
    module, pb)`` runs the pass manager (default: ``mpm.run(module, pb)``)."""
    pb = _pass_builder(tm, _OPT_LEVEL)
    mpm = pb.getModulePassManager()
    if run is None:
        mpm.run(module, pb)
    else:
        run(mpm, module, pb)


def internalise_all_but(module: Any, keep: tuple[str, ...], tm: Any) -> None:
    """Internal linkage for every definition of ``module`` not named in ``keep``
    (LLVM's intrinsics aside), then drop what nothing reachable uses."""
    import llvmlite.binding as ll

    for value in (*module.functions, *module.global_variables):
        if value.is_declaration or value.name in keep:
            continue
        if value.name.startswith("llvm."):
            continue
        value.linkage = "internal"
    mpm = ll.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(module, _pass_builder(tm, 0))


def link_artifact(
    codegen: Any, handler_ir: Any, entry: str, kernel_library: Any | None
) -> Artifact:
    """Parse ``handler_ir``, optimise it, link ``kernel_library`` in (unless None:
    then the kernel stays a declaration, resolved in this process), internalise
    everything but ``entry`` and drop dead code. ``handler_ir`` is an
    ``llvmlite.ir`` module, or a callable giving a new copy of the handler already
    optimised, in Numba's context (``handler_ir(codegen)``: see :mod:`.ahead`)."""
    import llvmlite.binding as ll

    module: Any  # llvmlite.binding.ModuleRef
    if callable(handler_ir):
        module = handler_ir(codegen)
    else:
        module = ll.parse_assembly(str(handler_ir))
        module.data_layout = codegen._data_layout
        optimise_handler(module, codegen._tm)
    if kernel_library is not None:
        module.link_in(kernel_library._get_module_for_linking(), preserve=True)
    internalise_all_but(module, (entry,), codegen._tm)
    module = name_threading_functions(module)
    artifact = Artifact(module, entry)
    if kernel_library is not None:
        artifact.environments, artifact.problems = _export_environments(module, entry)
        artifact.problems += containment_problems(module, entry)
    else:
        artifact.problems = ["the kernel is linked from this process"]
    module.verify()
    return artifact


def _export_environments(module: Any, entry: str) -> tuple[list, list[str]]:
    """Export the Numba environment globals the code still reads (see module doc),
    renamed ``<entry>.env<i>``; problems for environments that hold constants."""
    from numba.core.environment import Environment

    exported, problems = [], []
    for gv in module.global_variables:
        name = gv.name
        if gv.is_declaration or not name.startswith("_ZN08NumbaEnv"):
            continue
        env = Environment._memo.get(name)
        if env is None or env.consts:
            what = "unknown" if env is None else f"{len(env.consts)} constants"
            problems.append(f"a Numba environment with {what} ({name})")
            continue
        gv.name = f"{entry}.env{len(exported)}"
        gv.linkage = "external"
        exported.append((gv.name, str(env.globals.get("__name__", ""))))
    return exported, problems


def containment_problems(
    module: Any, entry: str, exported: tuple[str, ...] = ()
) -> list[str]:
    """Why ``module`` could depend on this process (empty: it cannot).
    ``exported``: functions besides ``entry`` the module may define externally
    (the kernel's alias in the kernel's own object: :mod:`.parts`)."""
    problems = []
    for gv in module.global_variables:
        name = gv.name
        if name.startswith("numba.dynamic.globals"):
            problems.append(f"a dynamic global ({name}: an address of this process)")
        elif name.startswith(".numba.unresolved$"):
            problems.append(f"a symbol resolved at run time ({name})")
        elif "NumbaEnv" in name and not name.startswith(".const."):
            problems.append(f"a Numba environment ({name}) the code reads")
        elif not gv.is_declaration and gv.linkage.name not in ("internal", "private"):
            if not name.startswith(f"{entry}.env"):
                problems.append(f"an exported global ({name})")
        elif gv.is_declaration and name.startswith("_ZN"):
            problems.append(f"a Numba global defined elsewhere ({name})")
    for fn in module.functions:
        if fn.is_declaration and fn.name.startswith("_ZN"):
            problems.append(f"a Numba function defined elsewhere ({fn.name})")
        elif (
            not fn.is_declaration
            and fn.name != entry
            and fn.name not in exported
            and fn.linkage.name
            not in (
                "internal",
                "private",
            )
        ):
            problems.append(f"an exported function ({fn.name})")
    match = _ADDRESS.search(str(module))
    if match:
        problems.append(f"a baked-in address ({match.group(0)} ...)")
    return problems


def external_symbols(module: Any) -> list[str]:
    """Names the object needs from the process (declarations), sorted."""
    names = {
        v.name
        for v in (*module.functions, *module.global_variables)
        if v.is_declaration and not v.name.startswith("llvm.")
    }
    return sorted(names)


def unresolved(codegen: Any, names: list[str]) -> list[str]:
    """The ``names`` neither the process nor Numba's JIT engine defines now (MCJIT
    aborts the process on an unresolved symbol, so this is checked first)."""
    import llvmlite.binding as ll

    engine = codegen._engine
    return [
        n
        for n in names
        if ll.address_of_symbol(n) is None and not engine.is_symbol_defined(n)
    ]


def emit_object(codegen: Any, artifact: Artifact) -> bytes:
    """Machine code for the artefact, with the JIT's own target machine."""
    return bytes(codegen._tm.emit_object(artifact.module))


def load_object(
    codegen: Any, entry: str, obj: bytes, environments: list | None = None
) -> tuple[Any, int]:
    """Load ``obj`` into Numba's JIT engine; return ``(owner, entry address)``.

    Numba's cache uses the same ``unserialize_library`` path; the bitcode it
    wants beside the object only tells the engine which symbols the object
    defines, so a stub naming ``entry`` stands in for it. ``environments`` are
    the ``(symbol, module)`` pairs to point at fresh Numba environments; the
    returned owner keeps them alive.
    """
    import ctypes

    import llvmlite.binding as ll
    from numba.core.compiler_lock import global_compiler_lock

    from .shared import fresh_environment

    environments = environments or []
    stub_ir = f'define void @"{entry}"() {{\n  ret void\n}}\n'
    stub_ir += "".join(f'@"{sym}" = global ptr null\n' for sym, _ in environments)
    stub = ll.parse_assembly(stub_ir)
    envs = []
    with global_compiler_lock:
        library = codegen.unserialize_library(
            (entry, "object", (obj, stub.as_bitcode()))
        )
        address = library.get_pointer_to_function(entry)
        for symbol, modname in environments:
            env = fresh_environment(modname)
            slot = codegen._engine.get_global_value_address(symbol)
            ctypes.c_void_p.from_address(slot).value = id(env)
            envs.append(env)
    if not address:
        raise RuntimeError(f"the handler object does not define '{entry}'")
    return (library, envs), address
