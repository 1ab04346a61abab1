"""``polykernel info``: versions, devices, FFI API version and usable backends.

Every check is cheap: package metadata and ``PATH`` look-ups, no imports of optional
packages and no compiling.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform as _platform
import shutil
from pathlib import Path
from typing import Any

from .info_pallas import pallas_rows
from .info_warp import warp_rows

__all__ = [
    "cmd_info",
    "ffi_api_version",
    "gather_info",
    "numba_cuda_rows",
    "register",
    "triton_rows",
]


def register(sub: Any, common: Any) -> None:
    """Add the ``info`` sub-command to ``sub``."""
    p = sub.add_parser("info", parents=[common], help="versions, devices, toolchains")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=cmd_info)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def ffi_api_version() -> str | None:
    """Return ``"MAJOR.MINOR"`` of the XLA FFI C API in jaxlib's headers, or None.

    Example:
        >>> ffi_api_version()  # doctest: +SKIP
        '0.3'
    """
    from ..errors import BackendUnavailableError
    from ..ffi.abi import installed_api_version

    try:  # one reader of jaxlib's header: the FFI layer's
        major, minor = installed_api_version()
    except BackendUnavailableError:
        return None
    return f"{major}.{minor}"


def _package(dist: str, module: str, extra: str) -> tuple[bool, str]:
    version = _version(dist)
    if version is None or importlib.util.find_spec(module) is None:
        return False, f'not installed (pip install "polykernel[{extra}]")'
    return True, f"{dist} {version}"


def _tool(finder: str) -> tuple[bool, str]:
    from ..errors import ToolchainError
    from ..native import toolchain

    try:
        return True, getattr(toolchain, finder)()
    except ToolchainError as err:
        return False, " ".join(str(err).split())


def numba_cuda_rows(gpu: bool) -> list[tuple[str, str, bool, str]]:
    """Numba-CUDA: launched natively on a GPU; the CUDA simulator on the CPU.

    Reports the installed version, whether a GPU runs it, and whether its PTX can
    be compiled here (NVVM, from the ``numba-cuda[cu13]`` extra) without a GPU.

    Example:
        >>> [r[1] for r in numba_cuda_rows(gpu=False)]
        ['gpu', 'cpu']
    """
    ok, why = _package("numba-cuda", "numba_cuda", "numba-cuda")
    if not ok:
        return [("numba_cuda", "gpu", False, why), ("numba_cuda", "cpu", False, why)]
    nvvm = _version("nvidia-nvvm") or _version("nvidia-cuda-nvcc-cu12")
    compile_note = (
        f"PTX compiles here (NVVM {nvvm})" if nvvm else "no NVVM: PTX not compilable"
    )
    gpu_note = "native launch" if gpu else "no GPU visible to JAX"
    return [
        ("numba_cuda", "gpu", gpu and bool(nvvm), f"{why}; {gpu_note}; {compile_note}"),
        ("numba_cuda", "cpu", True, f"{why}; Numba's CUDA simulator (slow, for tests)"),
    ]


def _backends(gpu: bool) -> list[dict[str, Any]]:
    no_gpu = "no GPU visible to JAX"
    rows = [("jax_raw", "cpu/gpu/tpu", True, "pure JAX, always available")]
    ok, why = _package("numba", "numba", "numba")
    rows.append(("numba", "cpu", ok, why))
    rows += numba_cuda_rows(gpu)
    rows += warp_rows(gpu)
    rows += triton_rows(gpu)
    rows += pallas_rows(gpu)
    ok, why = _tool("find_host_compiler")
    rows.append(("cuda_raw", "cpu", ok, f"C++ compiler: {why}"))
    ok, why = _tool("find_nvcc")
    why = f"nvcc: {why}" + ("" if gpu or not ok else f"; {no_gpu}")
    rows.append(("cuda_raw", "gpu", ok and gpu, why))
    keys = ("backend", "platform", "usable", "detail")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def triton_rows(gpu: bool) -> list[tuple[str, str, bool, str]]:
    """Triton's rows: its interpreter on CPU, and on GPU (compile check: ptxas).

    Triton bundles ``ptxas``; when it is there, cubins can be compiled (and
    checked) on a machine without a GPU. Triton itself is not imported.

    Example:
        >>> [row[:2] for row in triton_rows(gpu=False)]  # doctest: +SKIP
        [('triton', 'cpu'), ('triton', 'gpu')]
    """
    ok, why = _package("triton", "triton", "triton")
    if not ok:
        return [("triton", "cpu", False, why), ("triton", "gpu", False, why)]
    spec = importlib.util.find_spec("triton")
    roots = list(spec.submodule_search_locations or []) if spec else []
    ptxas = any((Path(r) / "backends/nvidia/bin/ptxas").is_file() for r in roots)
    compile_check = (
        "cubins compile here (bundled ptxas)"
        if ptxas
        else ("no bundled ptxas: cannot compile cubins")
    )
    gpu_detail = f"{why}; {compile_check}" + ("" if gpu else "; no GPU visible to JAX")
    return [
        ("triton", "cpu", True, f"{why}; Triton's interpreter (tests, small inputs)"),
        ("triton", "gpu", gpu, gpu_detail),
    ]


def gather_info() -> dict[str, Any]:
    """Collect what ``polykernel info`` prints, as a JSON-ready dict.

    Example:
        >>> gather_info()["versions"]["polykernel"]  # doctest: +SKIP
        '0.1.0'
    """
    import jax

    from .. import config
    from .._version import __version__
    from ..tuned_defaults import defaults_path

    devices = jax.devices()
    gpu = any(d.platform in ("gpu", "cuda", "rocm") for d in devices)
    return {
        "versions": {
            "polykernel": __version__,
            "python": _platform.python_version(),
            "jax": jax.__version__,
            "jaxlib": _version("jaxlib"),
            "numpy": _version("numpy"),
        },
        "jax": {
            "default_platform": jax.default_backend(),
            "devices": [str(d) for d in devices],
            "ffi_api_version": ffi_api_version(),
        },
        "gpu_present": gpu,
        "nvidia_smi": shutil.which("nvidia-smi"),
        "paths": {
            "cache_root": str(config.cache_root()),
            "config_dir": str(config.config_dir()),
            "tuned_defaults": str(defaults_path()),
        },
        "backends": _backends(gpu),
    }


def _print_text(info: dict[str, Any]) -> None:
    for key, value in info["versions"].items():
        print(f"{key:<14} {value or 'not installed'}")
    jx = info["jax"]
    print(f"{'platform':<14} {jx['default_platform']}")
    print(f"{'devices':<14} {', '.join(jx['devices'])}")
    print(f"{'FFI API':<14} {jx['ffi_api_version'] or 'unknown (headers not found)'}")
    print(f"{'GPU':<14} {'yes' if info['gpu_present'] else 'no (none visible to JAX)'}")
    for key, value in info["paths"].items():
        print(f"{key:<14} {value}")
    print("\nbackends:")
    for row in info["backends"]:
        mark = "yes" if row["usable"] else "no "
        print(f"  {row['backend']:<11} {row['platform']:<12} {mark}  {row['detail']}")


def cmd_info(args: Any) -> int:
    """Handler of ``polykernel info``."""
    info = gather_info()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        _print_text(info)
    return 0
