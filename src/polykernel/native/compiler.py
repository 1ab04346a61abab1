"""Compiler driver: options, the exact command line, and running it.

C++ for the CPU is built by the host compiler (g++/clang++) at ``-O3`` unless told
otherwise; CUDA by nvcc with one ``-gencode`` per target architecture plus PTX for
the newest, so newer GPUs can JIT it.

Every module is built self-contained where the toolchain allows it: the C++ runtime
is linked statically with its symbols hidden (``-static-libstdc++ -static-libgcc
-Wl,--exclude-libs,ALL``) and only the handlers are exported
(``-fvisibility=hidden``). A module then never binds the C++ runtime of whatever
else the process loaded: a library with an unhidden static libstdc++ exports its
locale-facet ids as ``STB_GNU_UNIQUE`` symbols, which the dynamic linker unifies
process-wide, and after it has used iostreams an ordinarily linked module crashes
in ``basic_ostream::_M_insert<long>`` on libstdc++ 6.0.33 (seen on Ubuntu 24.04,
reproduced on Debian trixie). Hiding matters: ``-static-libstdc++`` alone still
exports those symbols. Where no static libstdc++ is installed (e.g. RHEL without
libstdc++-static), modules link it dynamically.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import (
    CompilationError,
    HostCompilerIncompatibleError,
    KernelRegistrationError,
    KernelTypeError,
    UnsupportedArchError,
)
from ..settings.cuda_arch import normalize_arch

__all__ = [
    "CompileOptions",
    "build_command",
    "classify_failure",
    "include_dirs",
    "run_compiler",
]

_MAX_MESSAGE_OUTPUT = 8000


@dataclass(frozen=True)
class CompileOptions:
    """How a native module is compiled (every field is part of the cache key).

    Attributes:
        optimization: ``0``-``3`` or ``"s"``; becomes ``-O<n>``. Default ``3``.
        fast_math: ``-ffast-math`` (C++) / ``--use_fast_math`` (CUDA).
        extra_cflags: more compiler flags, appended last.
        include_paths: extra ``-I`` directories (their headers' stats join the key).
        ldflags: linker flags, e.g. ``["-lm"]``.
        cuda_arch: CUDA targets, e.g. ``["sm_80", "sm_90"]``; default
            ``$POLYKERNEL_CUDA_ARCH``, else the visible GPUs.
        compiler: host compiler (default ``$CXX``, else g++/clang++); for CUDA it is
            passed to nvcc as ``-ccbin`` when given.
        nvcc: nvcc to use (default ``$POLYKERNEL_NVCC``, ``$CUDA_HOME/bin``, PATH).
        timeout: seconds before a compile is abandoned.

    Example:
        >>> from polykernel import CompileOptions
        >>> CompileOptions(optimization=2, fast_math=True).optimization
        2
    """

    optimization: int | str = 3
    fast_math: bool = False
    extra_cflags: Sequence[str] = ()
    include_paths: Sequence[str] = ()
    ldflags: Sequence[str] = ()
    cuda_arch: Sequence[str] | None = None
    compiler: str | None = None
    nvcc: str | None = None
    timeout: float = field(default=600.0, compare=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and f.name in (
                "extra_cflags",
                "include_paths",
                "ldflags",
                "cuda_arch",
            ):
                value = [value]
            if isinstance(value, list | tuple):
                object.__setattr__(self, f.name, tuple(str(v) for v in value))
        self._check()

    def _check(self) -> None:
        """Wrong types are TypeErrors, bad values ValueErrors; both name the field."""
        where = "polykernel.native: CompileOptions"
        if isinstance(self.optimization, bool) or str(self.optimization) not in (
            "0",
            "1",
            "2",
            "3",
            "s",
            "fast",
        ):
            raise KernelRegistrationError(
                f"{where}(optimization={self.optimization!r}) is not valid; expected "
                "0, 1, 2, 3 or 's'."
            )
        if not isinstance(self.fast_math, bool):
            raise KernelTypeError(
                f"{where}(fast_math={self.fast_math!r}) is not valid; expected True "
                "or False."
            )
        for name in ("extra_cflags", "include_paths", "ldflags", "cuda_arch"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                raise KernelTypeError(
                    f"{where}({name}={value!r}) is not valid; expected a list of "
                    "strings."
                )
        for arch in self.cuda_arch or ():
            normalize_arch(arch)  # UnsupportedArchError (a ValueError) names it
        for name in ("compiler", "nvcc"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise KernelTypeError(
                    f"{where}({name}={value!r}) is not valid; expected a path string "
                    "or None."
                )
        timeout = self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise KernelTypeError(
                f"{where}(timeout={timeout!r}) is not valid; expected seconds as a "
                "number."
            )
        if not timeout > 0:
            raise KernelRegistrationError(
                f"{where}(timeout={timeout!r}) is not valid; expected a positive "
                "number of seconds."
            )


@functools.cache
def include_dirs() -> tuple[str, str]:
    """(polykernel's include dir, jaxlib's include dir holding xla/ffi/api/ffi.h)."""
    import jax.ffi

    return str(
        Path(__file__).resolve().parent.parent / "include"
    ), jax.ffi.include_dir()


# Host-compiler flags that make a module self-contained (see the module docstring).
SELF_CONTAINED = ("-static-libstdc++", "-static-libgcc")
_HIDE_STATIC_LIBS = "--exclude-libs,ALL"


def ptx_arch(arches: Sequence[str]) -> str:
    """The architecture a CUDA build also embeds PTX for: the newest of ``arches``
    (``'90a'`` counts as 90), so GPUs newer than every cubin can still run it."""
    return max(arches, key=lambda a: int("".join(c for c in a if c.isdigit())))


def build_command(
    platform: str,
    compiler: str,
    options: CompileOptions,
    arches: tuple[str, ...],
    source: str,
    output: str,
    self_contained: bool = True,
    hide_symbols: bool = True,
) -> list[str]:
    """The full command line (``source``/``output`` are placeholders in the key).

    ``hide_symbols`` exports only what is marked visible (our generated handlers);
    sources compiled for the user through ``CPPBackend``/``CUDABackend`` keep
    default visibility, since their functions are what the caller loads.
    """
    pk_inc, jax_inc = include_dirs()
    # -isystem: warnings inside jaxlib's headers are not the user's problem.
    common = [f"-O{options.optimization}", "-std=c++17", "-shared"]
    common += ["-isystem", jax_inc, "-I", pk_inc]
    common += [f"-I{p}" for p in options.include_paths]
    host_flags = ["-fPIC", "-fvisibility=hidden"] if hide_symbols else ["-fPIC"]
    host_flags += list(SELF_CONTAINED) if self_contained else []
    if platform == "cuda":
        cmd = [compiler, *common]
        for flag in host_flags:
            cmd += ["-Xcompiler", flag]
        if self_contained:
            cmd += ["-Xlinker", _HIDE_STATIC_LIBS]
        if options.compiler:
            cmd += ["-ccbin", options.compiler]
        for arch in arches:
            cmd += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
        newest = ptx_arch(arches)
        cmd += ["-gencode", f"arch=compute_{newest},code=compute_{newest}"]
        if options.fast_math:
            cmd.append("--use_fast_math")
    else:
        cmd = [compiler, *common, *host_flags]
        if self_contained:
            cmd.append(f"-Wl,{_HIDE_STATIC_LIBS}")
        if options.fast_math:
            cmd.append("-ffast-math")
    return [*cmd, *options.extra_cflags, source, "-o", output, *options.ldflags]


def run_compiler(
    module: str, cmd: list[str], source_path: Path, timeout: float, echo: bool = False
) -> float:
    """Run ``cmd``; return seconds taken. ``echo`` prints the command and output.

    Raises:
        CompilationError: non-zero exit or timeout; carries the compiler's output,
            the command and the path of the kept source.
    """
    if echo:
        print(f"polykernel.native module '{module}': {shlex.join(cmd)}", flush=True)
    start = time.perf_counter()
    env = dict(os.environ)
    env.setdefault("LC_ALL", "C")  # stable, English compiler messages
    try:
        proc = subprocess.run(
            cmd, capture_output=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as err:
        raise CompilationError(
            f"polykernel.native module '{module}': the compiler ran longer than "
            f"{timeout:.0f} s and was stopped. Source kept at {source_path}. Raise "
            "CompileOptions(timeout=...) if the kernel is legitimately large.",
            output=_text(err.stdout) + _text(err.stderr),
            source_path=str(source_path),
            command=cmd,
        ) from None
    except OSError as err:
        raise CompilationError(
            f"polykernel.native module '{module}': cannot run {cmd[0]!r}: {err}.",
            source_path=str(source_path),
            command=cmd,
        ) from err
    output = _text(proc.stdout) + _text(proc.stderr)
    if echo and output:
        print(output, end="" if output.endswith("\n") else "\n", flush=True)
    if proc.returncode != 0:
        shown = output[-_MAX_MESSAGE_OUTPUT:]
        raise CompilationError(
            f"polykernel.native module '{module}': compilation failed "
            f"({os.path.basename(cmd[0])} exit code {proc.returncode}). Source kept "
            f"at {source_path}. Compiler output:\n{shown}",
            output=output,
            source_path=str(source_path),
            command=cmd,
        )
    return time.perf_counter() - start


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def classify_failure(err: CompilationError) -> CompilationError | UnsupportedArchError:
    """The reference's finer class for a compiler failure whose remedy is known.

    An architecture nvcc does not support -> ``UnsupportedArchError``; a host
    compiler nvcc refuses -> ``HostCompilerIncompatibleError``; a failure at link
    time keeps ``CompilationError`` with ``stage="link"``.
    """
    low = err.output.lower()
    command = shlex.join(err.command) if isinstance(err.command, list) else err.command
    if "unsupported gpu architecture" in low:
        return UnsupportedArchError(
            "polykernel.native: nvcc does not support the requested GPU "
            "architecture. Pin one it supports (compute_capability='sm_80' for "
            "load_cuda_*, gpu_arch=... for CUDABackend, or "
            "polykernel.config.set_compute_capability('8.0')), or upgrade the CUDA "
            f"toolkit.\nCompiler output:\n{err.output[-4000:]}",
            compiler_output=err.output,
            command=command,
            stage=err.stage,
        )
    if "unsupported gnu version" in low or "-allow-unsupported-compiler" in low:
        return HostCompilerIncompatibleError(
            "polykernel.native: nvcc rejects the host C++ compiler's version. "
            "Install a gcc/clang this CUDA supports and set CXX to it (or pass "
            "CompileOptions(compiler=...) / toolchain=...).\nCompiler output:\n"
            f"{err.output[-4000:]}",
            output=err.output,
            command=err.command,
            source_path=err.source_path,
            stage=err.stage,
        )
    if "undefined reference" in low or "ld returned" in low or "ld: " in low:
        err.stage = "link"
    return err
