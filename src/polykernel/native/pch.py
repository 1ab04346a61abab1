"""``polykernel.h`` precompiled once per compiler and flags, for GCC's C++ builds.

Every C++ module starts with ``#include "polykernel.h"``: some 9,000 lines once the
C and C++ headers it includes are in, about a quarter of a small module's compile.
GCC, looking for an included header, first looks for ``<header>.gch`` in each
directory it searches, the source's own first, and uses it only when it is valid
for the compile at hand (the same compiler and options; else it reads the header
as usual). So a build links a cached ``polykernel.h.gch`` next to its source: the
command line, the module's cache key and the library it makes are unchanged (GCC
writes the same bytes), only the parsing is skipped.

The header is precompiled when a build finds no precompiled copy in a cache that
holds a library already (a fresh cache's first build, perhaps its only one, pays
nothing), by a second compiler process beside that build's own compile (which goes
on without it), and kept as an entry of the cache's ``pch`` section keyed by
everything that decides its content: the compiler's fingerprint, the exact flags,
our headers and jaxlib's, the user's include directories. Its record lists every
header the compiler read with its size and mtime; one that changed since (a system
upgrade) retires the copy, and the next build makes a new one. A compile that fails
on the precompiled header (GCC names the PCH file) runs again without it, so a
build's result and messages are always those of the plain compile.

Only GCC (clang looks for no ``.gch`` on ``#include``), only C++ (not nvcc), only a
source whose first line includes ``polykernel.h``, and only a process that can write
the cache makes one. Every failure here is a build without a precompiled header.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cache.admin import apply_size_cap
from ..cache.entries import entry_path, publish_entry, read_entry
from ..cache.locks import eviction_lock
from ..errors import CacheError
from ..settings import paths as config
from . import cache

__all__ = ["FILE", "INCLUDE", "SECTION", "Maker", "find", "header_command", "start"]

log = logging.getLogger(__name__)
#: The cache section of precompiled headers, and the file of an entry.
SECTION = "pch"
FILE = "polykernel.h.gch"
#: The first line of every source a precompiled header can serve.
INCLUDE = '#include "polykernel.h"\n'
#: Flags that only the link step reads (dropped when precompiling).
_LINK_ONLY = ("-shared", "-static-libstdc++", "-static-libgcc")

_lock = threading.Lock()
_ready: dict[str, Path] = {}  # key -> this process's verified private copy


def header_command(command: Sequence[str], stub: Path, out: Path) -> list[str]:
    """The module's compile ``command`` (``<src>``/``<out>`` placeholders) made to
    precompile ``stub`` into ``out``: the same compiler flags, no link step, and
    the headers it reads listed in ``out`` + ``.d``."""
    flags = list(command[1 : command.index("<src>")])
    kept, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag == "-Xlinker":
            skip = True
        elif flag not in _LINK_ONLY and not flag.startswith("-Wl,"):
            kept.append(flag)
    deps = f"{out}.d"
    return [command[0], *kept, "-c", "-MD", "-MF", deps, "-o", str(out),
            "-x", "c++-header", str(stub)]  # fmt: skip


def find(key: str) -> Path | None:
    """A verified private copy of the precompiled header ``key``, or None (none
    in the cache, or one made from headers that changed since: retired)."""
    with _lock:
        known = _ready.get(key)
        if known is not None and known.is_file():
            return known
    entry = read_entry(SECTION, key)
    if entry is None or FILE not in entry.files:
        return None
    if not _headers_unchanged(entry.meta.get("headers")):
        _retire(key, entry.readonly)
        return None
    folder = Path(tempfile.mkdtemp(prefix="pch-", dir=cache.private_dir()))
    copy = folder / FILE  # nothing can change it between the check and the use
    copy.write_bytes(entry.files[FILE])
    with _lock:
        _ready[key] = copy
    return copy


def _headers_unchanged(headers: object) -> bool:
    if not isinstance(headers, list):
        return False
    try:
        return all(_stat(path) == [path, size, mtime] for path, size, mtime in headers)
    except (OSError, TypeError, ValueError):
        return False


def _stat(path: str) -> list:
    st = os.stat(path)
    return [path, st.st_size, st.st_mtime_ns]


def _retire(key: str, readonly: bool) -> None:
    log.info("polykernel cache: the precompiled header %s was made from headers "
             "that changed since; it is not used", key[:12])  # fmt: skip
    if readonly:
        return  # never written: the writable root's copy (if any) is made anew
    section = config.cache_root() / SECTION
    with eviction_lock(section, key) as free:
        if free:
            shutil.rmtree(entry_path(SECTION, key), ignore_errors=True)


@dataclass
class Maker:
    """A precompiled header being made beside a build (:func:`start`)."""

    key: str
    process: subprocess.Popen
    folder: Path
    out: Path
    hold: contextlib.ExitStack

    def finish(self, keep: bool, timeout: float) -> None:
        """Wait for it; publish it when ``keep`` (the build's library could be
        published: the cache is writable) and it was made, else drop it."""
        try:
            if not keep:
                self.process.kill()
            try:
                code = self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                code = self.process.wait()
            if keep and code == 0:
                self._publish()
            elif keep:
                log.info("polykernel cache: precompiling polykernel.h failed (exit "
                         "%s): builds go on without it", code)  # fmt: skip
        finally:
            self.hold.close()
            if not keep:
                shutil.rmtree(self.folder, ignore_errors=True)

    def _publish(self) -> None:
        try:
            headers = [_stat(p) for p in _dependencies(Path(f"{self.out}.d"))]
            data = self.out.read_bytes()
        except OSError as err:
            log.info("polykernel cache: cannot read the precompiled header (%s)", err)
            return
        meta = {"name": "polykernel.h (precompiled)", "headers": headers}
        if publish_entry(SECTION, self.key, {FILE: data}, meta) is not None:
            apply_size_cap()  # as after every write
        with _lock:  # the file just made serves this process's next builds
            _ready[self.key] = self.out


def _dependencies(deps: Path) -> list[str]:
    """The headers a ``-MD`` file lists (after the target and the stub)."""
    text = deps.read_text().replace("\\\n", " ")
    _target, _, files = text.partition(": ")
    paths = [os.path.abspath(p) for p in files.split()]
    return paths[1:]  # paths[0] is the stub, in a folder removed after the build


def start(key: str, command: Sequence[str]) -> Maker | None:
    """Start precompiling ``polykernel.h`` for the builds of ``command``, or None
    when another thread or process is making it now or it cannot be started."""
    hold = contextlib.ExitStack()
    try:
        section = config.cache_root() / SECTION
        if not hold.enter_context(eviction_lock(section, key)):
            hold.close()
            return None  # another builder makes it; this build goes on without
        folder = Path(tempfile.mkdtemp(prefix="pch-make-", dir=cache.private_dir()))
        stub = folder / "stub.h"
        stub.write_text(INCLUDE)
        out = folder / FILE
        env = {**os.environ}
        env.setdefault("LC_ALL", "C")
        process = subprocess.Popen(
            header_command(command, stub, out), env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, CacheError, ValueError) as err:
        hold.close()
        log.info("polykernel cache: cannot precompile polykernel.h (%s)", err)
        return None
    return Maker(key, process, folder, out, hold)
