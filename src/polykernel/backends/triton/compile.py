"""Compile a ``@triton.jit`` kernel for one CUDA architecture, ahead of the call.

``triton.compile`` with a :class:`~triton.backends.compiler.GPUTarget` needs no GPU:
it produces the PTX and the cubin (through the ``ptxas`` Triton ships) and the
metadata the launch needs (entry name, warps, dynamic shared memory, scratch sizes).
Results are memoised in-process and kept in the launcher's build cache under a
content key (:mod:`.fingerprint`, :mod:`polykernel.launcher.cache`): a new process
whose cache holds the build reads it back without calling Triton's compiler (no
``ptxas``, no code generator imported).

FP fusion is requested explicitly (on, Triton's current default) so the result does
not depend on ``TRITON_DEFAULT_FP_FUSION`` and Triton emits no warning about it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ...errors import KernelCompilationError, UnsupportedFeatureError
from ...launcher.cache import Build, cached_build
from ...launcher.kernels import KernelImage
from .fingerprint import build_key
from .params import TritonSignature

__all__ = ["CompiledTriton", "compile_triton", "triton_target"]

_lock = threading.Lock()
_memo: dict[Any, CompiledTriton] = {}
#: What a build keeps besides its entry and images (:func:`_from_build`).
_FIELDS = ("num_warps", "shared", "global_scratch_size", "global_scratch_align",
           "profile_scratch_size")  # fmt: skip


@dataclass(frozen=True)
class CompiledTriton:
    """What the launch needs of a compiled Triton kernel.

    Attributes:
        entry: the kernel's symbol in the cubin.
        images: the cubin and the PTX for the target architecture.
        num_warps: threads per block / 32.
        shared: dynamic shared memory in bytes.
        global_scratch_size, global_scratch_align: per-program global scratch (bytes).
        profile_scratch_size: per-program profiling scratch (0 unless profiling).
        ptx: the PTX text (its ``.param`` list is the launch's parameter list).
    """

    entry: str
    images: tuple[KernelImage, ...]
    num_warps: int
    shared: int
    global_scratch_size: int
    global_scratch_align: int
    profile_scratch_size: int
    ptx: str


def triton_target(arch: str) -> Any:
    """Triton's target for CUDA architecture ``arch`` (``'90'``; ``'90a'`` -> 90)."""
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", int("".join(c for c in arch if c.isdigit())), 32)


def _key(jit_fn: Any, sig: TritonSignature, arch: str, options: dict) -> tuple:
    consts = tuple(sorted((k, repr(v)) for k, v in sig.constexprs.items()))
    return (
        jit_fn.cache_key,
        tuple(sig.signature.items()),
        consts,
        arch,
        tuple(sorted(options.items())),
    )


def compile_triton(
    jit_fn: Any, sig: TritonSignature, arch: str, num_warps: int, num_stages: int
) -> CompiledTriton:
    """Compile ``jit_fn`` with signature ``sig`` for ``arch``: from the in-process
    memo, else the launcher's build cache, else Triton's compiler (then kept in both).

    Raises:
        KernelCompilationError: Triton rejected the kernel (its message attached).
        UnsupportedFeatureError: the kernel needs a launch our launcher does not do
            (thread-block clusters, cooperative grids).
    """
    options = {"num_warps": num_warps, "num_stages": num_stages,
               "enable_fp_fusion": True}  # fmt: skip
    key: Any = build_key(jit_fn, sig, arch, options)
    if key is None:  # no content key: memoised in this process only
        key = _key(jit_fn, sig, arch, options)
    with _lock:
        if key in _memo:
            return _memo[key]
    compiled = cached_build(key if isinstance(key, str) else None,
                            lambda: _compile(jit_fn, sig, arch, options),
                            _to_build, _from_build)  # fmt: skip
    with _lock:
        _memo[key] = compiled
    return compiled


def _to_build(compiled: CompiledTriton) -> Build:
    return Build(compiled.entry, compiled.images,
                 {name: getattr(compiled, name) for name in _FIELDS})  # fmt: skip


def _from_build(build: Build) -> CompiledTriton | None:
    """The compiled kernel a build holds; None when it is not one of ours (a
    miss: compiled again)."""
    ptx = [im for im in build.images if im.kind == "ptx"]
    try:
        warps, shared, scratch, align, profile = (int(build.fields[n]) for n in _FIELDS)
        text = ptx[0].data.decode()
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return CompiledTriton(build.entry, build.images, warps, shared, scratch, align,
                          profile, text)  # fmt: skip


def _compile(
    jit_fn: Any, sig: TritonSignature, arch: str, options: dict[str, Any]
) -> CompiledTriton:
    """Triton's compiler, checked for what the launcher can launch."""
    import triton
    from triton.compiler import ASTSource

    from .cpu import language_lock

    src = ASTSource(jit_fn, dict(sig.signature), dict(sig.constexprs), sig.attrs)
    try:
        # Never while an interpreted launch has triton.language patched.
        with language_lock:
            kernel = triton.compile(src, target=triton_target(arch), options=options)
    except Exception as err:
        raise KernelCompilationError(
            f"triton_kernel '{sig.kernel}': Triton could not compile the kernel for "
            f"sm_{arch} with signature {sig.signature} "
            f"({type(err).__name__}: {err})"
        ) from err
    meta = kernel.metadata
    if getattr(meta, "num_ctas", 1) != 1 or getattr(
        meta, "launch_cooperative_grid", False
    ):
        raise UnsupportedFeatureError(
            f"triton_kernel '{sig.kernel}': the compiled kernel needs thread-block "
            "clusters or a cooperative launch (num_ctas > 1), which polykernel's "
            "launcher does not do; compile with num_ctas=1."
        )
    ptx = kernel.asm["ptx"]
    images = (
        KernelImage("cubin", arch, bytes(kernel.asm["cubin"])),
        KernelImage("ptx", arch, ptx.encode()),
    )
    return CompiledTriton(
        entry=meta.name,
        images=images,
        num_warps=meta.num_warps,
        shared=meta.shared,
        global_scratch_size=meta.global_scratch_size,
        global_scratch_align=meta.global_scratch_align,
        profile_scratch_size=getattr(meta, "profile_scratch_size", 0),
        ptx=ptx,
    )
