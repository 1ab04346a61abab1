"""Link object files into a shared object: how a kernel becomes a loadable artefact.

Backends whose code comes out of an LLVM code generator as an object file (Numba's
handler, Warp's CPU module and its handler) link it here, at build time, into a
shared object that :mod:`polykernel.ffi.artefact` loads with no compiler package.
Symbols left undefined (the CPython C API, polykernel's runtime library) are
resolved by the dynamic loader when the library is opened.

The linker is the C compiler driver (``$CC``, else cc, gcc, clang, else the host
C++ compiler): it knows the platform's linker and start files. The output is
reproducible (no build id), written beside its final name and renamed into place.

Environment variables:
    CC: the C compiler driver used to link.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import CompilationError, HostCompilerNotFoundError
from .toolchain import find_host_compiler

__all__ = ["find_linker", "link_shared"]


@functools.cache
def find_linker() -> str:
    """Absolute path of the compiler driver that links shared objects.

    Raises:
        HostCompilerNotFoundError: none is installed.
    """
    for name in filter(None, (os.environ.get("CC"), "cc", "gcc", "clang")):
        found = shutil.which(name)
        if found:
            return os.path.abspath(found)
    try:
        return find_host_compiler()
    except HostCompilerNotFoundError:
        raise HostCompilerNotFoundError(
            "polykernel.native: no C compiler found to link a kernel into a shared "
            "object (tried $CC, cc, gcc, clang, g++, clang++). Install gcc or "
            "clang, or set CC."
        ) from None


def link_shared(
    objects: Sequence[bytes], out: Path, *, flags: Sequence[str] = ()
) -> Path:
    """Link the object files ``objects`` (their bytes) into the shared object ``out``.

    Raises:
        HostCompilerNotFoundError: no compiler driver is installed.
        CompilationError: the link failed (its output is in the message).
    """
    linker = find_linker()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pk-link-", dir=out.parent) as tmp:
        paths = []
        for i, data in enumerate(objects):
            path = Path(tmp) / f"part{i}.o"
            path.write_bytes(data)
            paths.append(str(path))
        staged = Path(tmp) / out.name
        reproducible = ["-Wl,--build-id=none"] if sys.platform == "linux" else []
        command = [linker, "-shared", "-o", str(staged), *paths, *reproducible,
                   *flags]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise CompilationError(
                f"polykernel.native: linking {out.name} failed "
                f"(exit {done.returncode}): {' '.join(command)}\n"
                f"{(done.stderr or done.stdout)[-4000:]}",
                output=done.stdout + done.stderr,
                command=command,
                stage="link",
            )
        os.replace(staged, out)
    return out
