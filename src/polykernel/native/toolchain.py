"""Find the host C++ compiler, nvcc and the CUDA target architectures, once.

Discovery is memoised per process. A compiler's *fingerprint* (its ``--version``
output plus the real binary it resolves to) goes into every cache key; it is stored
on disk with the other probe results (can it link libstdc++ statically?) keyed by
the binary's path, mtime and size, so a new process costs one ``stat`` per file
instead of compiler subprocesses.

Environment variables:
    CXX: host compiler for C++ (default: the first of g++, clang++, c++ on PATH).
    POLYKERNEL_NVCC: nvcc to use (default: ``$CUDA_HOME/bin/nvcc``, then PATH).
    POLYKERNEL_CUDA_ARCH: comma-separated target architectures, e.g. ``80,90``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..errors import (
    GpuArchDetectionError,
    HostCompilerNotFoundError,
    NvccNotFoundError,
    ToolchainError,
)
from ..settings.cuda_arch import jax_cuda_arches, normalize_arch
from ..settings.preferences import pinned_cuda_arches

__all__ = [
    "cuda_arches",
    "find_host_compiler",
    "find_nvcc",
    "fingerprint",
    "has_static_runtime",
    "is_gcc",
]

log = logging.getLogger(__name__)
ARCH_ENV = "POLYKERNEL_CUDA_ARCH"
_ARCH_HELP = (
    "pass options=CompileOptions(cuda_arch=['sm_80']) to load_cuda_inline/"
    f"load_cuda_file, or set {ARCH_ENV}=80 (comma-separated for several)"
)


@functools.cache
def find_host_compiler(explicit: str | None = None) -> str:
    """Absolute path of the host C++ compiler (``explicit``, ``$CXX``, g++, clang++).

    Example:
        >>> from polykernel.native.toolchain import find_host_compiler
        >>> find_host_compiler().endswith("++")
        True
    """
    candidates = [explicit] if explicit else []
    if not explicit and os.environ.get("CXX"):
        candidates.append(os.environ["CXX"])
    if not candidates:
        candidates = ["g++", "clang++", "c++"]
    for name in candidates:
        found = shutil.which(name)
        if found:
            return os.path.abspath(found)
    raise HostCompilerNotFoundError(
        f"polykernel.native: no C++ compiler found (tried {', '.join(candidates)}). "
        "Install g++ or clang++, or set CXX / CompileOptions(compiler=...) to one."
    )


@functools.cache
def find_nvcc(explicit: str | None = None) -> str:
    """Absolute path of nvcc (``explicit``, ``$POLYKERNEL_NVCC``, CUDA_HOME, PATH)."""
    candidates = [explicit] if explicit else []
    if not explicit:
        if os.environ.get("POLYKERNEL_NVCC"):
            candidates.append(os.environ["POLYKERNEL_NVCC"])
        for var in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(var):
                candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
        candidates.append("nvcc")
    for name in candidates:
        found = shutil.which(name)
        if found:
            return os.path.abspath(found)
    raise NvccNotFoundError(
        f"polykernel.native: nvcc not found (tried {', '.join(candidates)}). Install "
        "the CUDA toolkit and put nvcc on PATH, or set POLYKERNEL_NVCC / CUDA_HOME."
    )


def _stat_id(path: str) -> list:
    st = os.stat(path)
    return [os.path.realpath(path), st.st_mtime_ns, st.st_size]


def _store_path(store: Path, compiler: str) -> Path:
    digest = hashlib.sha256(json.dumps(_stat_id(compiler)).encode()).hexdigest()
    return store / f"{digest[:32]}.json"


_SCHEMA = 2


@functools.cache
def _record(compiler: str, store: Path | None) -> dict:
    """What polykernel needs to know about ``compiler``, probed once per binary.

    Stored as JSON under ``store`` keyed by the compiler's path, mtime and size (and
    those of the real nvcc behind a wrapper), so a new process reuses it after one
    ``stat`` per file instead of running the compiler.
    """
    record_path = _store_path(store, compiler) if store is not None else None
    if record_path is not None and record_path.is_file():
        try:
            record = json.loads(record_path.read_text())
            if record.get("schema") == _SCHEMA and all(
                _stat_id(c[0]) == c for c in record["checks"]
            ):
                return record
        except (OSError, ValueError, KeyError, TypeError):
            pass  # unreadable or stale record: probe again and overwrite it
    record = _probe(compiler)
    if record_path is not None:  # a speed-up: a cache that cannot take it is no error
        from ..cache.store import atomic_write, cache_problem, describe, ensure_dir
        from ..errors import CacheError

        try:
            ensure_dir(record_path.parent)
            atomic_write(record_path, json.dumps(record).encode())
        except (OSError, CacheError) as err:
            cache_problem(describe(err), "cannot keep the compiler's probe")
    return record


def fingerprint(compiler: str, store: Path | None = None) -> str:
    """A string that changes whenever ``compiler`` (or the toolkit behind it) changes.

    Args:
        compiler: absolute compiler path.
        store: directory of saved probes (``<cache>/native/toolchains``); a saved
            one is reused while every file it depends on keeps its stat.

    Example:
        >>> from polykernel.native.toolchain import fingerprint, find_host_compiler
        >>> "g++" in fingerprint(find_host_compiler()) or True
        True
    """
    return _record(compiler, store)["fingerprint"]


def is_gcc(compiler: str, store: Path | None = None) -> bool:
    """Whether the host ``compiler`` is GCC's (g++, or a ``c++`` that is g++): the
    compiler that uses a precompiled ``<header>.gch`` found on ``#include``.

    Example:
        >>> from polykernel.native.toolchain import is_gcc, find_host_compiler
        >>> isinstance(is_gcc(find_host_compiler()), bool)
        True
    """
    version = _record(compiler, store)["fingerprint"]
    return "Free Software Foundation" in version and "clang" not in version.lower()


def has_static_runtime(compiler: str, store: Path | None = None) -> bool:
    """Whether the host ``compiler`` can link libstdc++ statically (``libstdc++.a``).

    Example:
        >>> from polykernel.native.toolchain import (
        ...     has_static_runtime, find_host_compiler,
        ... )
        >>> isinstance(has_static_runtime(find_host_compiler()), bool)
        True
    """
    return bool(_record(compiler, store).get("static_libstdcxx"))


def _run(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ToolchainError(f"polykernel.native: cannot run {cmd!r}: {err}") from err
    return (proc.stdout + proc.stderr).decode("utf-8", "replace")


def _probe(compiler: str) -> dict:
    log.debug("probing compiler %s", compiler)
    version = _run([compiler, "--version"]).strip()
    checks = [_stat_id(compiler)]
    static = False
    if os.path.basename(os.path.realpath(compiler)).startswith("nvcc"):
        # nvcc on PATH is often a wrapper script; its dry run names the real toolkit.
        dry = _run([compiler, "--dryrun", "--version"])
        top = re.search(r"^#\$ _HERE_=(.*)$", dry, re.M)
        real = os.path.join(top.group(1).strip(), "nvcc") if top else None
        if real and os.path.isfile(real):
            checks.append(_stat_id(real))
    else:
        archive = _run([compiler, "-print-file-name=libstdc++.a"]).strip()
        if os.path.isabs(archive) and os.path.isfile(archive):
            static = True
            checks.append(_stat_id(archive))
    text = json.dumps([version, checks])
    return {
        "schema": _SCHEMA,
        "fingerprint": f"{version} | {hashlib.sha256(text.encode()).hexdigest()[:16]}",
        "checks": checks,
        "static_libstdcxx": static,
    }


def cuda_arches(explicit: Sequence[str] | None) -> tuple[str, ...]:
    """Target architectures: explicit, pinned, ``$POLYKERNEL_CUDA_ARCH``, then GPUs.

    The pin is ``polykernel.config.set_compute_capability``.

    Raises:
        GpuArchDetectionError: no architecture given and no GPU to detect one from.
    """
    if explicit:
        return tuple(normalize_arch(a) for a in explicit)
    if pinned := pinned_cuda_arches():  # polykernel.config.set_compute_capability
        return pinned
    env = os.environ.get(ARCH_ENV, "").strip()
    if env:
        return tuple(normalize_arch(a) for a in env.split(",") if a.strip())
    detected = _detect_gpu_arches()
    if not detected:
        raise GpuArchDetectionError(
            "polykernel.native: no CUDA GPU is visible (nvidia-smi found none), so the "
            f"target architecture cannot be detected; {_ARCH_HELP}."
        )
    return detected


@functools.cache
def _detect_gpu_arches() -> tuple[str, ...]:
    """The architectures of the GPUs here: JAX's GPUs when JAX has started its
    backends (no process: ``nvidia-smi`` costs a warm process ~20 ms, and lists
    GPUs ``CUDA_VISIBLE_DEVICES`` hides from JAX), else ``nvidia-smi``'s.

    JAX is asked by platform (``jax.devices()`` lists only the default platform's
    devices: under ``JAX_PLATFORMS=cpu,cuda`` no GPU) and only once a backend has
    started: starting one here would fix JAX's configuration before its user does.
    """
    import sys

    if "jax" in sys.modules:  # never imported here: native builds need no JAX
        from .._jax_compat import backends_initialised

        if backends_initialised() and (found := jax_cuda_arches()):
            return found
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    out = _run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"])
    caps = sorted({normalize_arch(x) for x in re.findall(r"\d+\.\d+", out)})
    return tuple(caps)
