"""``polykernel info``: versions, devices, FFI API version and usable backends.

Every check is cheap: package metadata and ``PATH`` look-ups, no imports of optional
packages and no compiling.
"""

from __future__ import annotations

import json
import platform as _platform
import shutil
from typing import Any

from ..platforms import Platform, platform_of

__all__ = ["cmd_info", "ffi_api_version", "gather_info", "register"]


def register(sub: Any, common: Any) -> None:
    """Add the ``info`` sub-command to ``sub``."""
    p = sub.add_parser("info", parents=[common], help="versions, devices, toolchains")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=cmd_info)


def ffi_api_version() -> str | None:
    """Return ``"MAJOR.MINOR"`` of the XLA FFI C API in jaxlib's headers, or None.

    Example:
        >>> from polykernel.cli.info import ffi_api_version
        >>> ffi_api_version()  # e.g. '0.3'
        '...'
    """
    from ..errors import BackendUnavailableError
    from ..ffi.abi import installed_api_version

    try:  # one reader of jaxlib's header: the FFI layer's
        major, minor = installed_api_version()
    except BackendUnavailableError:
        return None
    return f"{major}.{minor}"


def _backends(gpu: bool) -> list[dict[str, Any]]:
    """Every backend's rows, asked of the backend table (no optional imports; a
    broken plugin or hook is a row saying what is wrong)."""
    from .. import backends

    keys = ("backend", "platform", "usable", "detail")
    rows = backends.info_rows(gpu)
    return [dict(zip(keys, row, strict=True)) for row in rows]


def gather_info() -> dict[str, Any]:
    """Collect what ``polykernel info`` prints, as a JSON-ready dict.

    Example:
        >>> import polykernel as pk
        >>> from polykernel.cli.info import gather_info
        >>> gather_info()["versions"]["polykernel"] == pk.__version__
        True
    """
    import jax

    from .._jax_compat import all_devices
    from .._version import __version__, installed_version
    from ..dispatch.table import tuned_path
    from ..settings import paths as config

    devices = all_devices()
    gpu = any(platform_of(d.platform) == Platform.GPU for d in devices)
    return {
        "versions": {
            "polykernel": __version__,
            "python": _platform.python_version(),
            "jax": jax.__version__,
            "jaxlib": installed_version("jaxlib"),
            "numpy": installed_version("numpy"),
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
            "tuned_table": str(tuned_path()),
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
        head = f"  {row['backend']:<11} {row['platform']:<12} {mark}  "
        print(_wrapped(head, row["detail"]))


#: The widest line ``polykernel info`` prints (a path may still be longer).
WIDTH = 100


def _wrapped(head: str, detail: str) -> str:
    """``head`` then ``detail`` wrapped within :data:`WIDTH` columns, continued
    under the detail's first column (a detail runs to 230 columns)."""
    import textwrap

    wrap = textwrap.TextWrapper(
        WIDTH,
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(wrap.wrap(detail)) or head.rstrip()


def cmd_info(args: Any) -> int:
    """Handler of ``polykernel info``."""
    info = gather_info()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        _print_text(info)
    return 0
