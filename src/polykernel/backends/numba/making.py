"""Build a handler (the cold path of :mod:`.build`): compile, link, cache, load.

The kernel is compiled for the signature (:mod:`.compile`), the handler generated
around it (``ffi.handler_ir`` + :mod:`.entry`) and both linked into one module
proven self-contained (:mod:`.artifact`). That module becomes, in order of
preference:

1. a shared object calling polykernel's runtime library (:mod:`.shared`), loaded
   here first (a library that does not load is never cached), then published;
2. where no C compiler can link, or the code calls a Numba helper the runtime
   library lacks (:func:`.rewrite.unsupported`), or linking fails: an object file
   loaded into Numba's JIT, cached the same way (loading it needs Numba);
3. where the code depends on this process (see :mod:`.artifact`): the handler
   alone, its call to the kernel resolved by Numba's JIT in this process, never
   cached.

Each fallback's reason is logged at DEBUG under ``polykernel.backends.numba.build``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from ...ffi.artefact import Artefact, Requirements
from ...ffi.handler_ir.signature import Signature
from .handler import Handler

__all__ = ["build", "codegen", "load_jit_object", "magic"]

# The reasons a handler is not a cached shared object are documented under the
# logger of the module users know, .build.
log = logging.getLogger(f"{__package__}.build")


def codegen() -> tuple[Any, Any]:
    """Numba's CPU target context and code generator (slow to start: only when a
    handler is built or a JIT object is loaded)."""
    from numba.core.registry import cpu_target

    # also starts Numba's runtime (NRT); Numba's cached property is untyped
    context: Any = cpu_target.target_context
    return context, context.codegen()


def magic(gen: Any) -> str:
    """What a JIT object is compiled for beyond its target name: the triple, CPU
    name and features of Numba's JIT."""
    return json.dumps(list(map(str, gen.magic_tuple())))


def _resolvable(context: Any, names: list[str]) -> bool:
    """True if every symbol resolves now. Numba starts its runtime (NRT) and its
    threading layer lazily, at the first compile, and a cache hit compiles
    nothing: start whichever the object needs (MCJIT aborts the process on a
    missing symbol, so nothing is loaded before this holds)."""
    from .artifact import unresolved

    gen = context.codegen()
    missing = unresolved(gen, names)
    if any(n.startswith("NRT_") for n in missing):
        from numba.core.runtime.nrt import rtsys

        rtsys.initialize(context)
        missing = unresolved(gen, names)
    if missing:
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
        missing = unresolved(gen, names)
    if missing:
        log.debug("unresolved symbols: %s", ", ".join(missing))
    return not missing


def load_jit_object(context: Any, entry: str, obj: bytes, meta: dict) -> Handler | None:
    """The JIT object ``obj`` loaded into Numba's engine, as a handler; None when
    a symbol it needs cannot be resolved here."""
    from .artifact import load_object

    if not _resolvable(context, meta["externals"]):
        return None
    envs = [tuple(e) for e in meta.get("environments", [])]
    library, address = load_object(context.codegen(), entry, obj, envs)
    return Handler(entry, address, library, "disk")


def _meta(target: str, label: str, sig: Signature, artifact: Any, externals: list,
          requires: Requirements, **more: Any) -> dict:  # fmt: skip
    req = requires.to_json()
    return {"entry": target, "label": label, "signature": sig.key(),
            "externals": externals, "environments": artifact.environments,
            "requires": req, **more}  # fmt: skip


def build(
    target: str, sig: Signature, label: str, kernel: Any, private: dict,
    *, cacheable: bool,
) -> Handler:  # fmt: skip
    """Compile and link the handler ``target``; publish it when ``cacheable`` and
    self-contained; load it."""
    from numba.core.compiler_lock import global_compiler_lock

    from ...ffi.handler_ir.handler import define_handler
    from .ahead import start
    from .artifact import external_symbols, link_artifact
    from .compile import compile_prepared, from_numba_cache, prepare
    from .entry import emit_kernel_call
    from .rewrite import unsupported
    from .shared import linker_available

    if linker_available():  # the shared-object handler will need the runtime
        from ...native.runtime import prefetch_runtime

        prefetch_runtime()  # built beside Numba's compile, not after it
    context, gen = codegen()
    prepared = prepare(kernel, sig, private)
    # The handler is optimised beside Numba's compile (see .ahead), else after it.
    ahead = start(context, gen, target, sig, label, prepared)
    binding = compile_prepared(prepared)
    optimised = ahead.take(binding) if ahead is not None else None
    if optimised is not None:
        handler_ir: Any = optimised.module  # link_artifact calls it for each copy
    else:
        handler_ir = gen._create_empty_module(target)
        define_handler(handler_ir, target, sig, label,
                       emit_kernel_call(context, binding))  # fmt: skip
    with global_compiler_lock:  # LLVM's context is Numba's, shared
        artifact = link_artifact(gen, handler_ir, target, binding.cres.library)
        reused = from_numba_cache(binding.cres.library)
        if reused:
            artifact.problems.append(f"code from Numba's own disk cache ({reused})")
        if not artifact.self_contained:
            log.debug(
                "numba_kernel '%s': not cached, the linked code depends on this "
                "process: %s",
                label,
                "; ".join(artifact.problems),
            )
            artifact = link_artifact(gen, handler_ir, target, None)
        externals = external_symbols(artifact.module)
        objects: list[bytes] | None = None
        if artifact.self_contained:
            why = _shared_refused(externals, unsupported, linker_available)
            if why is None:
                objects = _objects(gen, artifact, optimised, binding)
            else:
                log.debug("numba_kernel '%s': loaded by Numba's JIT: %s", label, why)
    if objects is not None:  # linked outside the lock: a compiler process
        handler = _shared(objects, artifact, target, label, sig, externals,
                          cacheable)  # fmt: skip
        if handler is not None:
            return handler
    return _jit(context, gen, artifact, binding, target, label, sig, externals,
                cacheable)  # fmt: skip


def _objects(gen: Any, artifact: Any, optimised: Any, binding: Any) -> list[bytes]:
    """The shared object's object files: the handler's, generated while Numba
    compiled the kernel, and the kernel's (:mod:`.parts`); else the artefact as
    one object. Hold Numba's compiler lock."""
    from .parts import kernel_object
    from .shared import emit_handler

    handler = optimised.handler_object if optimised is not None else None
    if handler is not None:
        kernel = kernel_object(gen, artifact, binding.cres.fndesc.mangled_name)
        if kernel is not None:
            return [handler, kernel]
        log.debug("'%s': the kernel's object could not be cut from the artefact; "
                  "emitted as one", artifact.entry)  # fmt: skip
    return [emit_handler(gen, artifact.module)]


def _jit(
    context: Any, gen: Any, artifact: Any, binding: Any, target: str, label: str,
    sig: Signature, externals: list, cacheable: bool,
) -> Handler:  # fmt: skip
    """The handler as an object file in Numba's JIT, cached when self-contained."""
    from numba.core.compiler_lock import global_compiler_lock

    from . import cache as handler_cache
    from .artifact import emit_object, load_object

    with global_compiler_lock:
        if not _resolvable(context, externals):
            raise RuntimeError(f"unresolved symbols {externals}")
        obj = emit_object(gen, artifact)
    origin = "uncached"
    if cacheable and artifact.self_contained:
        meta = _meta(target, label, sig, artifact, externals,
                     Requirements.here(ffi=handler_cache.ffi_digest()),
                     format="object", magic=magic(gen))  # fmt: skip
        published = handler_cache.publish(target, handler_cache.OBJECT, obj, meta)
        origin = "built" if published else "unpublished"
    library, address = load_object(gen, target, obj, artifact.environments)
    return Handler(target, address, (library, binding.cres.library), origin)


def _shared_refused(externals: list, unsupported: Any, linker: Any) -> str | None:
    """Why the handler cannot be a shared object (None: it can)."""
    missing = unsupported(externals)
    if missing:
        return f"it calls {', '.join(missing)}, which the runtime library lacks"
    if not linker():
        return "no C compiler to link a shared object"
    return None


def _shared(
    objects: list[bytes], artifact: Any, target: str, label: str, sig: Signature,
    externals: list, cacheable: bool,
) -> Handler | None:  # fmt: skip
    """Link, load (here first: a library that does not load is never cached) and
    publish the shared-object handler; None when it does not link or load (the
    caller takes the JIT path)."""
    from ...errors import CompilationError, KernelLoadError
    from . import cache as handler_cache
    from .shared import link_handler, load_handler

    try:
        path = link_handler(objects, target)
        owner, address = load_handler(path, target, artifact.environments)
    except (CompilationError, KernelLoadError) as err:
        log.debug("numba_kernel '%s': loaded by Numba's JIT: %s", label, err)
        return None
    data = path.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    requires = Requirements.here(ffi=handler_cache.ffi_digest(), runtime=True)
    origin = "uncached"
    if cacheable:
        meta = _meta(target, label, sig, artifact, externals, requires,
                     format="shared")  # fmt: skip
        published = handler_cache.publish(target, handler_cache.SHARED, data, meta)
        origin = "built" if published else "unpublished"
    artefact = Artefact(target, "numba", str(path), target, sha256, requires,
                        label=label, extra={"runtime": True})  # fmt: skip
    return Handler(target, address, owner, origin, artefact=artefact)
