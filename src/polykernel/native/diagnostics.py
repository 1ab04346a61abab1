"""``print_diagnostics``: what a bug report about native kernels needs, in one place.

:func:`diagnostics` gathers it as a dict (versions, FFI headers, compilers, CUDA
architectures, cache, registered FFI targets) and :func:`print_diagnostics` prints it;
both are cheap (two ``--version`` runs at most, nothing compiled, nothing written), so
a CLI can reuse them. A probe that fails is reported as text, never raised.
"""

from __future__ import annotations

import platform as _platform
import re
import sys
from pathlib import Path
from typing import IO, Any

from ..errors import KernelToolchainError

__all__ = ["diagnostics", "print_diagnostics"]


def _ffi_api_version(include_dir: str) -> str:
    header = Path(include_dir) / "xla" / "ffi" / "api" / "c_api.h"
    try:
        text = header.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"unknown ({header} not readable)"
    found = dict(re.findall(r"#define\s+XLA_FFI_API_(MAJOR|MINOR)\s+(\d+)", text))
    return f"{found.get('MAJOR', '?')}.{found.get('MINOR', '?')}"


def _compiler(finder: str) -> str:
    from . import toolchain

    try:
        path = getattr(toolchain, finder)()
        version = toolchain.fingerprint(path).split(" | ")[0]
    except KernelToolchainError as err:
        return "not found: " + " ".join(str(err).split())
    lines = [line.strip() for line in version.splitlines() if line.strip()]
    # nvcc's first lines are a banner; its version is on the "release" line.
    release = [line for line in lines if "release" in line]
    return f"{path} ({(release or lines or ['?'])[0]})"


def _cuda_arches() -> str:
    from . import toolchain

    try:
        return ", ".join(f"sm_{a}" for a in toolchain.cuda_arches(None))
    except KernelToolchainError as err:
        return "none: " + " ".join(str(err).split())


def diagnostics() -> dict[str, Any]:
    """Versions, toolchain, CUDA architectures, cache and FFI targets, as a dict.

    Example:
        >>> from polykernel.native.diagnostics import diagnostics
        >>> sorted(diagnostics())[:3]
        ['cache', 'cuda_arch', 'cxx']
    """
    import jax
    import jax.ffi
    import jaxlib.version

    from .._version import __version__
    from ..ffi.targets import list_registered_targets
    from . import cache

    include_dir = jax.ffi.include_dir()
    info = cache.info()
    return {
        "polykernel": __version__,
        "python": f"{_platform.python_version()} ({sys.executable})",
        "jax": jax.__version__,
        "jaxlib": jaxlib.version.__version__,
        "ffi_include": include_dir,
        "ffi_api": _ffi_api_version(include_dir),
        "cxx": _compiler("find_host_compiler"),
        "nvcc": _compiler("find_nvcc"),
        "cuda_arch": _cuda_arches(),
        "cache": {
            "root": info["root"],
            "native_entries": info.get("native_entries", 0),
            "bytes": info["bytes"],
        },
        "targets": list_registered_targets(),
    }


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def print_diagnostics(file: IO[str] | None = None) -> None:
    """Print :func:`diagnostics` as text (to ``file``, default stdout).

    Example:
        >>> from polykernel import print_diagnostics
        >>> print_diagnostics()
        polykernel     ...
    """
    out = file if file is not None else sys.stdout
    info = diagnostics()
    for key in ("polykernel", "python", "jax", "jaxlib", "ffi_include", "ffi_api"):
        print(f"{key:<14} {info[key]}", file=out)
    for key in ("cxx", "nvcc", "cuda_arch"):
        print(f"{key:<14} {info[key]}", file=out)
    c = info["cache"]
    print(
        f"{'cache':<14} {c['root']} ({c['native_entries']} native modules, "
        f"{_size(c['bytes'])} in all)",
        file=out,
    )
    print(f"{'ffi targets':<14} {len(info['targets'])}", file=out)
    for name in info["targets"]:
        print(f"  - {name}", file=out)
