"""What polykernel's runtime library is built from, and the copy built at install.

The runtime library (:mod:`polykernel.native.runtime`) is one C translation unit
compiled with fixed flags. This module holds that recipe (the sources, the flags,
the ABI version) and nothing else of polykernel's: the package's build hook
(``hatch_build.py``, run by ``pip install``) loads this file by its path, with no
JAX or polykernel importable, and compiles the library into the package
(:data:`SHIPPED`), with a ``recipe.json`` saying what it was built from.

An empty cache then adopts that copy instead of running the C compiler on a
machine's first kernel (:func:`shipped_library`): only when the recipe it was
built from is this one (source, flags, ABI version, architecture and OS) and its
bytes are the ones recorded. Anything else (no compiler at install, an edited
source, a damaged file) leaves the library to be built at first use, as before.
Only the standard library is imported here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

#: Bumped with ``PKRT_ABI_VERSION`` in ``runtime/pkrt.h``.
ABI_VERSION = 1
NAME = "polykernel_runtime"
SOURCES = ("pkrt.h", "errors.c", "numeric.c", "nrt.c", "schedule.c", "pool.c")
# Portable code (no -march): one build serves the machine and any bundle it
# writes. IEEE arithmetic as written (no contraction into FMAs): the scheduler's
# float rounding must be Numba's.
FLAGS = ("-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden",
         "-ffp-contract=off", "-fno-fast-math", "-std=gnu11")  # fmt: skip
#: The C sources' folder.
SOURCE_DIR = Path(__file__).with_name("runtime")
#: Where the build hook puts the library it compiled, with its ``recipe.json``.
SHIPPED = SOURCE_DIR / "shipped"
LIBRARY = "lib.so"
RECIPE = "recipe.json"


@functools.cache
def source() -> str:
    """The library's one translation unit: the header, then each file."""
    parts = []
    for name in SOURCES:
        text = (SOURCE_DIR / name).read_text()
        if name.endswith(".c"):  # the header is already in, first
            text = text.replace('#include "pkrt.h"\n', "")
        parts.append(f'#line 1 "{name}"\n{text}')
    return "\n".join(parts)


def command(compiler: str, src: str, out: str) -> list[str]:
    """The compile of ``src`` into the shared object ``out`` with ``compiler``."""
    return [compiler, *FLAGS, "-x", "c", src, "-o", out, "-lm"]


def recipe(machine: str) -> dict[str, str]:
    """What a build for ``machine`` (``<architecture>-<os>``) is made from."""
    return {
        "source_sha256": hashlib.sha256(source().encode()).hexdigest(),
        "flags": " ".join(FLAGS),
        "abi": str(ABI_VERSION),
        "machine": machine,
    }


def shipped_library(machine: str, folder: Path = SHIPPED) -> bytes | None:
    """The bytes of the library built at install, when it was built from this
    recipe for ``machine`` and is intact; else None (build it)."""
    try:
        recorded = json.loads((folder / RECIPE).read_text())
        library = (folder / LIBRARY).read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict):
        return None
    sha = recorded.pop("library_sha256", None)
    if recorded != recipe(machine) or hashlib.sha256(library).hexdigest() != sha:
        return None
    return library


def write_shipped(library: bytes, machine: str, folder: Path = SHIPPED) -> None:
    """Record ``library`` as built from this recipe for ``machine``. Each file is
    written beside its name and renamed into place, the recipe last: builds
    running at once (several virtualenvs installing one checkout) leave one
    complete pair, and a reader never takes a half-written library."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {**recipe(machine), "library_sha256": hashlib.sha256(library).hexdigest()}
    recorded = json.dumps(record, indent=1, sort_keys=True).encode()
    for name, data in ((LIBRARY, library), (RECIPE, recorded)):
        part = folder / f".{name}.{os.getpid()}"
        part.write_bytes(data)
        os.replace(part, folder / name)
