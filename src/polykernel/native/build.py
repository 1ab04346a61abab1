"""The one native build path: look up, lock, build in a temporary directory, publish.

Every shared library polykernel compiles — the ``load_*`` modules of the ``cuda_raw``
backend and the GPU launcher — goes through :func:`fetch_or_build`:

1. **look up** the content-keyed entry in the cache (:mod:`.cache`: read-only tiers
   first; key, sizes, checksums and permissions verified; anything else is a miss)
   and load it;
2. **lock** the key with an OS file lock, so N processes build it once, and look up
   again under the lock (another process may have finished meanwhile);
3. **build** in a fresh folder private to this process, outside the cache (or the
   caller's ``build_directory``, whose files are kept there), keeping a failed
   build's sources under ``native/failed`` for inspection;
4. **publish** the library atomically (:mod:`polykernel.cache.entries`) and load it
   while the lock is still held. A cache that cannot be written is no failure: the
   library is loaded from the private build, with one warning naming the cause.

A C++ build with GCC parses ``polykernel.h`` from a precompiled copy in the cache
when it has one, and makes one beside its own compile when not (:mod:`.pch`).

The key parts every caller shares — our headers and jaxlib's FFI C API header, whose
API is our ABI — are hashed by :func:`headers_digest`, the one digest of them.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cache.store import KEY_CHARS, ensure_dir
from ..errors import CacheError, CompilationError
from . import cache
from .compiler import include_dirs, run_compiler

if TYPE_CHECKING:  # imported when a build runs: a cache hit never needs it
    from .pch import Maker

__all__ = ["BuildJob", "Fetched", "fetch_or_build", "headers_digest"]

log = logging.getLogger(__name__)
#: GCC's words for a precompiled header it could not use.
_PCH_TROUBLE = re.compile(r"\bPCH\b|\.gch\b|precompiled header")


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
        pch_parts: the key parts of the precompiled ``polykernel.h`` the compile
            may use (:mod:`.pch`: GCC, C++; everything that decides the header's
            compile, the module's code excluded); None for none.
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
    pch_parts: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Fetched:
    """A library fetched from the cache or built, and loaded.

    Attributes:
        path: the file that was loaded (in the cache, or a private build's).
        built: whether this process ran the compiler.
        handle: what the caller's ``load(path)`` returned.
    """

    path: Path
    built: bool
    handle: Any


def fetch_or_build(
    job: BuildJob,
    load: Callable[[Path], Any],
    classify: Callable[[CompilationError], Exception] | None = None,
) -> Fetched:
    """The library of ``job`` from the cache, or built now, loaded with ``load``.

    A library built here is loaded while the build lock is still held, so no
    ``prune``/``clear`` can remove it first. A cache that cannot be used is a miss:
    the library is built in a private folder and loaded from there.

    Raises:
        CompilationError: the compiler failed (``classify`` may refine the class).
        ToolchainError: the compiler cannot run.
    """
    if not job.force:
        hit = _load_hit(job, load)
        if hit is not None:
            return hit
    with cache.build_lock(job.key):
        if not job.force:
            hit = _load_hit(job, load)  # another process built it while we waited
            if hit is not None:
                return hit
        built, published = _build(job, classify)
        path = published or built
        try:
            handle = load(path)
        except OSError:
            if path == built:
                raise
            # Removed before loading: only possible unlocked (locks off or
            # unusable, and an admin command racing): load our own copy.
            path, handle = built, load(built)
        if path != built and not job.build_directory:
            shutil.rmtree(built.parent, ignore_errors=True)
        return Fetched(path, True, handle)


def _load_hit(job: BuildJob, load: Callable[[Path], Any]) -> Fetched | None:
    lib = cache.lookup(job.key)
    if lib is None:
        return None
    try:
        handle = load(lib)
    except OSError as err:  # removed between the check and the load: a miss
        log.info("polykernel cache: %s vanished before loading (%s)", lib, err)
        return None
    _say(job, f"cache hit {lib}.")
    return Fetched(lib, False, handle)


def _build(
    job: BuildJob, classify: Callable[[CompilationError], Exception] | None
) -> tuple[Path, Path | None]:
    """Compile in a private folder (or the caller's ``build_directory``); publish.

    Returns the built library and its published copy (None: not published).
    """
    if job.build_directory:
        build_dir = Path(job.build_directory)
        build_dir.mkdir(parents=True, exist_ok=True)
    else:  # outside the cache: no prune or clear can touch a build in progress
        build_dir = Path(tempfile.mkdtemp(prefix=f"{job.name}-",
                                          dir=cache.private_dir()))  # fmt: skip
    src, out = build_dir / f"{job.name}.{job.ext}", build_dir / f"{job.name}.so"
    src.write_text(job.source)
    command = [
        str(src) if c == "<src>" else str(out) if c == "<out>" else c
        for c in job.command
    ]
    failed = cache.native_root() / "failed" / f"{job.name}-{job.key[:12]}"
    maker = None
    published = None
    try:
        header, maker = _precompiled(job)
        try:
            seconds = _compile(job, command, build_dir, failed / src.name, header)
        except CompilationError as err:
            if not job.build_directory:
                _keep_failed(err, build_dir, failed, src)
            raise (classify(err) if classify else err) from None
        meta = {**job.meta, "name": job.name, "command": command, "seconds": seconds}
        library = out.read_bytes()
        published = cache.publish(job.key, library, job.source, job.ext, meta)
    finally:
        if maker is not None:  # kept only where the library could be published
            maker.finish(keep=published is not None, timeout=job.timeout)
    return out, published


def _precompiled(job: BuildJob) -> tuple[Path | None, Maker | None]:
    """The precompiled header ``job`` may use, or the one being made beside it."""
    from . import pch

    if (
        job.pch_parts is None
        or job.ext != "cpp"
        or not job.source.startswith(pch.INCLUDE)
    ):
        return None, None
    key = cache.compute_key({**job.pch_parts, "precompiled": pch.FILE})
    found = pch.find(key)
    if found is not None:
        return found, None
    if not _built_before():  # a first build (a fresh cache) pays nothing for it
        return None, None
    return None, pch.start(key, job.command)


def _built_before() -> bool:
    """Whether the cache holds a native library already: a cache that has built
    one will build more, and precompiling pays from the next build on."""
    try:
        with os.scandir(cache.native_root()) as entries:
            return any(
                len(e.name) == KEY_CHARS and e.is_dir(follow_symlinks=False)
                for e in entries
            )
    except OSError:
        return False


def _compile(
    job: BuildJob, command: list[str], build_dir: Path, kept: Path,
    header: Path | None,
) -> float:  # fmt: skip
    """Run the compiler, with the precompiled ``header`` beside the source when
    given; a compile that fails on it (GCC names the PCH file) runs again without
    it, so the plain compile's result and messages are the build's."""
    if header is None:
        return run_compiler(job.name, command, kept, job.timeout, job.verbose)
    link = build_dir / header.name  # polykernel.h.gch
    try:
        link.symlink_to(header)  # never over a file of the caller's build_directory
    except OSError:  # one in the way, or a folder that takes no link: plain
        return run_compiler(job.name, command, kept, job.timeout, job.verbose)
    _say(job, f"precompiled polykernel.h: {header}")
    try:
        return run_compiler(job.name, command, kept, job.timeout, job.verbose)
    except CompilationError as err:
        if not _PCH_TROUBLE.search(err.output):
            raise  # the source's own error: the plain compile would say the same
        log.info("polykernel.native module '%s': compiling again without the "
                 "precompiled header", job.name)  # fmt: skip
    finally:
        link.unlink(missing_ok=True)
    return run_compiler(job.name, command, kept, job.timeout, job.verbose)


def _keep_failed(err: CompilationError, build_dir: Path, failed: Path,
                 src: Path) -> None:  # fmt: skip
    """Keep a failed build's sources in the cache (``native/failed``); where the
    cache cannot take them, they stay in a folder the message names."""
    try:
        ensure_dir(failed.parent)
        shutil.rmtree(failed, ignore_errors=True)
        shutil.copytree(build_dir, failed)
        os.chmod(failed, 0o700)
    except (OSError, CacheError) as problem:
        kept = Path(tempfile.mkdtemp(prefix=f"polykernel-failed-{src.stem}-"))
        shutil.copytree(build_dir, kept, dirs_exist_ok=True)
        where = str(kept / src.name)
        err.args = (str(err).replace(str(failed / src.name), where),)
        err.source_path = where
        log.info("polykernel cache: failed build kept in %s (%s)", kept, problem)


def _say(job: BuildJob, text: str) -> None:
    if job.verbose:
        print(f"polykernel.native module '{job.name}': {text}")
