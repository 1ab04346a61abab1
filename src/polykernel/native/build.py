"""The one native build path: look up, lock, build in a temporary directory, publish.

Every shared library polykernel compiles — the ``load_*`` modules of the ``cuda_raw``
backend and the GPU launcher — goes through :func:`fetch_or_build`:

1. **look up** the content-keyed entry in the cache (:mod:`.cache`: size, checksum
   and permissions are verified; anything else is a miss);
2. **lock** the key with an OS file lock, so N processes build it once, and look up
   again under the lock (another process may have finished meanwhile);
3. **build** in a fresh temporary directory under ``native/tmp`` (or the caller's
   ``build_directory``, whose files are kept there), keeping a failed build's
   sources under ``native/failed`` for inspection;
4. **publish** the library atomically (the entry's ``meta.json`` is written last).

The key parts every caller shares — our headers and jaxlib's FFI C API header, whose
API is our ABI — are hashed by :func:`headers_digest`, the one digest of them.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CompilationError
from . import cache
from .compiler import include_dirs, keep_failed, run_compiler

__all__ = ["BuildJob", "fetch_or_build", "headers_digest"]


@functools.cache
def headers_digest() -> str:
    """One digest of every header a native build includes from us or jaxlib.

    Covers every file of polykernel's ``include/`` tree (by relative path and
    content) and jaxlib's ``xla/ffi/api/c_api.h``.
    """
    pk_inc, jax_inc = include_dirs()
    h = hashlib.sha256()
    root = Path(pk_inc)
    for f in sorted(root.rglob("*.h")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    c_api = Path(jax_inc) / "xla" / "ffi" / "api" / "c_api.h"
    h.update(c_api.name.encode() + b"\0" + c_api.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class BuildJob:
    """One library to fetch or build.

    Attributes:
        name: the module's name (messages, temporary and failed directories).
        key: its cache key (:func:`polykernel.native.cache.compute_key`).
        source: the translation unit's text.
        ext: the source's extension (``"cpp"``, ``"cu"``).
        command: the compiler command, with ``"<src>"``/``"<out>"`` placeholders.
        timeout: seconds the compiler may run.
        meta: more fields for the entry's ``meta.json``.
        verbose: print the command, its output and cache hits.
        force: build even when the cache holds the key.
        build_directory: build there and keep the files (the library is copied
            into the cache); None for a temporary directory.
    """

    name: str
    key: str
    source: str
    ext: str
    command: tuple[str, ...]
    timeout: float
    meta: dict[str, Any] = field(default_factory=dict)
    verbose: bool = False
    force: bool = False
    build_directory: str | None = None


def fetch_or_build(
    job: BuildJob,
    classify: Callable[[CompilationError], Exception] | None = None,
) -> tuple[Path, bool]:
    """The library of ``job`` from the cache, or built now; ``(path, built)``.

    Raises:
        CompilationError: the compiler failed (``classify`` may refine the class).
        ToolchainError: the compiler cannot run.
    """
    lib = None if job.force else cache.lookup(job.key)
    if lib is not None:
        _say(job, f"cache hit {lib}.")
        return lib, False
    with cache.build_lock(job.key):
        lib = None if job.force else cache.lookup(job.key)
        if lib is not None:  # another process built it while we waited
            return lib, False
        return _build(job, classify), True


def _build(
    job: BuildJob, classify: Callable[[CompilationError], Exception] | None
) -> Path:
    tmp_root = cache.ensure_dir(cache.native_root() / "tmp")
    if job.build_directory:
        build_dir = Path(job.build_directory)
        build_dir.mkdir(parents=True, exist_ok=True)
    else:
        build_dir = Path(tempfile.mkdtemp(prefix=f"{job.name}-", dir=tmp_root))
    src, out = build_dir / f"{job.name}.{job.ext}", build_dir / f"{job.name}.so"
    src.write_text(job.source)
    command = [
        str(src) if c == "<src>" else str(out) if c == "<out>" else c
        for c in job.command
    ]
    failed = cache.native_root() / "failed" / f"{job.name}-{job.key[:12]}"
    try:
        seconds = run_compiler(
            job.name, command, failed / src.name, job.timeout, job.verbose
        )
    except CompilationError as err:
        if not job.build_directory:
            cache.ensure_dir(failed.parent)
            keep_failed(build_dir, failed)
        raise (classify(err) if classify else err) from None
    meta = {**job.meta, "name": job.name, "command": command, "seconds": seconds}
    if job.build_directory:  # the caller's files stay; the cache gets a copy
        staged = Path(tempfile.mkdtemp(prefix=f"{job.name}-", dir=tmp_root))
        shutil.copy2(out, staged / "lib.so")
        lib = cache.publish(job.key, staged / "lib.so", job.source, job.ext, meta)
        shutil.rmtree(staged, ignore_errors=True)
    else:
        lib = cache.publish(job.key, out, job.source, job.ext, meta)
        shutil.rmtree(build_dir, ignore_errors=True)
    return lib


def _say(job: BuildJob, text: str) -> None:
    if job.verbose:
        print(f"polykernel.native module '{job.name}': {text}")
