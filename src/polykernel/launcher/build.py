"""Build (once, cached) and load the native GPU launcher library.

The launcher is a fixed C++ source, ``csrc/gpu_launcher.cc`` with its headers in
``csrc/gpu_launcher/`` (on the include path), compiled with the native
pipeline's compiler driver and stored in its content-keyed cache: the key covers
every file of the launcher (:func:`launcher_key`), our headers and jaxlib's FFI C
API header (the handler speaks that ABI), the command line and the compiler's
fingerprint. A cache hit in a new process runs no compiler. It needs no CUDA
toolkit: the driver API is loaded with ``dlopen("libcuda.so.1")`` on first use, so
the library builds with the host C++ compiler and loads on machines without a GPU.
``compiler="nvcc"`` builds the same source with nvcc instead (a check that it
compiles as CUDA too).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import KernelLoadError
from ..native import cache
from ..native.build import BuildJob, Fetched, fetch_or_build, headers_digest
from ..native.compiler import CompileOptions, build_command
from ..native.toolchain import (
    find_host_compiler,
    find_nvcc,
    fingerprint,
    has_static_runtime,
)
from ..platforms import LoweringPlatform
from .layout import ABI_VERSION

__all__ = [
    "LauncherLibrary",
    "adopt_launcher",
    "build_launcher",
    "launcher_key",
    "launcher_library",
    "launcher_source",
    "launcher_sources",
    "loaded_launcher",
]

_NAME = "polykernel_gpu_launcher"
_lock = threading.Lock()
_HOST_CFLAGS = ("-pthread",)
_NVCC_CFLAGS = ("-Xcompiler", "-pthread")


@functools.cache  # resolving the path is a few system calls; asked once per file
def launcher_source() -> Path:
    """Path of the launcher's C++ source inside the installed package."""
    return Path(__file__).resolve().parent / "csrc" / "gpu_launcher.cc"


def _launcher_headers_dir() -> Path:
    """The launcher's own headers (driver, spec, plan, load): an ``-I`` directory."""
    return launcher_source().with_suffix("")


def launcher_sources() -> dict[str, bytes]:
    """Every file the launcher compiles from, by path relative to ``csrc/``.

    The ``.cc`` and each header of ``csrc/gpu_launcher/``: all of them feed the
    cache key, so an edit to any one rebuilds.
    """
    main, headers = launcher_source(), _launcher_headers_dir()
    files = {main.name: main.read_bytes()}
    for h in sorted(headers.glob("*.h")):
        files[f"{headers.name}/{h.name}"] = h.read_bytes()
    return files


def launcher_key(sources: Mapping[str, bytes], context: Mapping[str, str]) -> str:
    """The launcher's cache key: its files (sorted by name, name and content) and
    the build ``context`` (command line, compiler fingerprint, versions...)."""
    h = hashlib.sha256()
    for name in sorted(sources):
        data = sources[name]
        # the length keeps file boundaries unambiguous
        h.update(f"{name}\0{len(data)}\0".encode() + data)
    return cache.compute_key({**context, "sources": h.hexdigest()})


def _options(compiler: str | None) -> CompileOptions:
    cflags = _NVCC_CFLAGS if compiler == "nvcc" else _HOST_CFLAGS
    return CompileOptions(
        extra_cflags=cflags,
        include_paths=(str(_launcher_headers_dir()),),
        ldflags=("-ldl",),
    )


def build_launcher(compiler: str | None = None) -> tuple[Path, bool]:
    """Compile the launcher (or find it in the cache); return ``(library, built)``.

    The library is loaded (``dlopen``) on the way: see :func:`fetch_launcher`.

    Args:
        compiler: ``None`` for the host C++ compiler (``$CXX``, g++, clang++), a
            path to one, or ``"nvcc"`` to build with nvcc.

    Raises:
        ToolchainError: no compiler found.
        CompilationError: the build failed (output and command attached).
    """
    fetched = fetch_launcher(compiler)
    return fetched.path, fetched.built


def fetch_launcher(compiler: str | None = None) -> Fetched:
    """The launcher fetched or built through the one native build path, loaded."""
    job = _job(compiler)
    return fetch_or_build(job, lambda path: ctypes.CDLL(str(path)))


def _job(compiler: str | None) -> BuildJob:
    """The launcher's build: source, command line and content key."""
    import jax
    import jaxlib.version

    sources = launcher_sources()
    source = sources[launcher_source().name].decode()
    store = cache.native_root() / "toolchains"
    options = _options(compiler)
    if compiler == "nvcc":
        platform, tool, ext = LoweringPlatform.CUDA, find_nvcc(), "cu"
        host = find_host_compiler()
    else:
        platform, tool, ext = LoweringPlatform.CPU, find_host_compiler(compiler), "cpp"
        host = tool
    static = has_static_runtime(host, store)
    arches = ("80",) if platform == LoweringPlatform.CUDA else ()
    cmd = build_command(platform, tool, options, arches, "<src>", "<out>", static)
    key = launcher_key(
        sources,
        {
            "component": f"{_NAME} abi {ABI_VERSION}",
            "flags": "\0".join(cmd[1:]),
            "compiler": fingerprint(tool, store),
            "headers": headers_digest(),
            "jax": f"jax {jax.__version__} jaxlib {jaxlib.version.__version__}",
            "polykernel": __version__,
        },
    )
    return BuildJob(_NAME, key, source, ext, tuple(cmd), options.timeout)


class LauncherLibrary:
    """The loaded launcher: its FFI handlers and the C functions Python calls.

    Attributes:
        path: the shared library.
        built: whether this process compiled it.
        launch, launch_nograph: addresses of the two FFI handlers (command-buffer
            compatible, and not).
    """

    def __init__(self, path: Path, built: bool, dll: Any = None) -> None:
        self.path = path
        self.built = built
        self.dll = dll = dll if dll is not None else ctypes.CDLL(str(path))
        i64, p = ctypes.c_int64, ctypes.c_void_p
        dll.pkgpu_abi_version.restype = ctypes.c_int
        dll.pkgpu_kernel_count.restype = i64
        dll.pkgpu_driver_status.restype = ctypes.c_int
        dll.pkgpu_driver_status.argtypes = [ctypes.c_char_p, i64]
        dll.pkgpu_register.restype = ctypes.c_int
        dll.pkgpu_register.argtypes = [ctypes.c_char_p] * 3 + [
            ctypes.c_char_p, i64, i64, p, p, p, p, ctypes.c_char_p, i64
        ]  # fmt: skip
        dll.pkgpu_plan_launches.restype = i64
        dll.pkgpu_plan_launches.argtypes = [ctypes.c_char_p, i64, p, p, p, p, p, i64,
                                            ctypes.c_char_p, i64]  # fmt: skip
        version = dll.pkgpu_abi_version()
        if version != ABI_VERSION:
            raise KernelLoadError(
                f"polykernel GPU launcher: {path} speaks ABI {version}, this "
                f"polykernel needs {ABI_VERSION}. Clear the cache (polykernel cache "
                "clear)."
            )
        self.launch = ctypes.cast(dll.polykernel_gpu_launch, p).value or 0
        self.launch_nograph = (
            ctypes.cast(dll.polykernel_gpu_launch_nograph, p).value or 0
        )

    def driver_status(self) -> tuple[bool, str]:
        """Whether the CUDA driver loads here, and why not (no GPU needed to ask)."""
        buf = ctypes.create_string_buffer(1024)
        ok = bool(self.dll.pkgpu_driver_status(buf, len(buf)))
        return ok, buf.value.decode("utf-8", "replace")

    def kernel_count(self) -> int:
        return int(self.dll.pkgpu_kernel_count())

    def plan_launches(
        self,
        kernel_id: str,
        dtype_codes: list[int],
        shapes: list[tuple[int, ...]],
        pointers: list[int],
        template_size: int,
    ) -> list[bytes]:
        """The parameter bytes of every launch a call with these buffers would make.

        Runs the handler's own checks, batch plan and packing on plain numbers (no
        GPU); an empty grid gives ``[]`` (the outputs would be zero-filled).

        Raises:
            ValueError: the handler would refuse the call (its message).
        """
        n = len(shapes)
        args = (
            kernel_id.encode(),
            n,
            _int64s(dtype_codes),
            _int64s([len(s) for s in shapes]),
            _int64s([d for s in shapes for d in s]),
            (ctypes.c_uint64 * n)(*pointers),
        )
        err = ctypes.create_string_buffer(1024)
        count = self.dll.pkgpu_plan_launches(*args, None, 0, err, len(err))
        out = ctypes.create_string_buffer(max(count * template_size, 1))
        if count > 0:
            count = self.dll.pkgpu_plan_launches(*args, out, len(out), err, len(err))
        if count < 0:
            raise ValueError(err.value.decode("utf-8", "replace"))
        raw = out.raw
        return [raw[i * template_size : (i + 1) * template_size] for i in range(count)]

    def contains(self, address: int) -> bool:
        """True when ``address`` lies inside this library's mapped code."""
        start, end = _mapped_range(self.path)
        return start <= address < end


def _int64s(values: list[int]) -> ctypes.Array:
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def _mapped_range(path: Path) -> tuple[int, int]:
    """Lowest and highest address the dynamic linker mapped for ``path`` (Linux)."""
    lo, hi, real = None, None, str(Path(path).resolve())
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[5] == real:
            a, b = (int(x, 16) for x in parts[0].split("-"))
            lo, hi = a if lo is None else min(lo, a), b if hi is None else max(hi, b)
    if lo is None or hi is None:
        raise KernelLoadError(f"polykernel GPU launcher: {path} is not mapped")
    return lo, hi


def launcher_library() -> LauncherLibrary:
    """The launcher of this process: built or fetched from the cache, then loaded
    (or the one a bundle brought, :func:`adopt_launcher`).

    Example:
        >>> from polykernel.launcher.build import launcher_library
        >>> lib = launcher_library()
        >>> ok, detail = lib.driver_status()  # (False, why) without a CUDA driver
        >>> isinstance(ok, bool) and isinstance(detail, str)
        True
    """
    global _loaded
    with _lock:
        if _loaded is None:
            fetched = fetch_launcher()
            _loaded = LauncherLibrary(fetched.path, fetched.built, fetched.handle)
        return _loaded


def loaded_launcher() -> LauncherLibrary | None:
    """The launcher this process has loaded, or None (nothing is built or read)."""
    with _lock:
        return _loaded


def adopt_launcher(path: Path, dll: Any) -> LauncherLibrary:
    """Make an already opened launcher library (a bundle's) this process's launcher,
    unless the process has one: then that one is kept and returned, since kernels
    registered with one library are unknown to another's handlers.

    Raises:
        KernelLoadError: it speaks another launcher ABI than this polykernel.
    """
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = LauncherLibrary(path, False, dll)
        return _loaded


#: The process's launcher, once loaded (one per process: it holds the kernel table).
_loaded: LauncherLibrary | None = None
