"""The content key of a Triton build, computed without Triton's compiler.

A new process must know whether the launcher's cache holds a kernel's cubin before
it asks Triton for one: ``triton.compile`` even with Triton's own disk cache warm
runs ``ptxas --version`` and imports its code generator (half a second on an
H200). :func:`build_key` names, as one digest, everything the compiler's output
depends on:

- the kernel: ``JITFunction.cache_key``, Triton's own content digest (the source,
  the ``@triton.jit`` functions it calls, the values of the ``constexpr`` globals it
  reads, its line), with the values of the other globals it reads (Triton allows
  them under ``TRITON_ALLOW_NON_CONSTEXPR_GLOBALS``; their ``repr``, so a value
  without a stable one is a miss, never a stale hit);
- the call: the signature, constexpr values and pointer attributes;
- the options (warps, stages, FP fusion) and the architecture;
- Triton's version and the settings its compiler reads from the environment
  (``TRITON_*``, the ptxas options; what Triton itself calls cache-invalidating).

Triton's ``triton_key()`` would hash every file of its install instead of the
version: a few hundred milliseconds, the cost this key exists to avoid.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ...launcher.cache import build_key as launcher_build_key
from .params import TritonSignature

__all__ = ["build_key"]

#: Settings Triton's compiler reads from the environment besides ``TRITON_*``.
_SETTINGS = ("PTXAS_OPTIONS", "DISABLE_PTXAS_OPT", "MLIR_ENABLE_DUMP")
#: ``TRITON_*`` variables that do not change what is compiled (where caches and
#: dumps go, the interpreter, logging): a change of them is no miss.
_NOT_CODE = frozenset((
    "TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_INTERPRET",
    "TRITON_CACHE_MANAGER", "TRITON_REMOTE_CACHE_BACKEND", "TRITON_PRINT_AUTOTUNING",
))  # fmt: skip
#: With it, Triton compiles IR files found in ``TRITON_OVERRIDE_DIR`` instead of
#: the kernel's: content no key can see, so such a process keeps no builds.
_OVERRIDE = "TRITON_KERNEL_OVERRIDE"


def _settings() -> list[tuple[str, str]]:
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars
    except ImportError:  # a Triton without the list: the TRITON_* variables below
        found: dict[str, str] = {}
    else:
        found = {str(k): str(v) for k, v in get_cache_invalidating_env_vars().items()}
    for name, value in os.environ.items():
        if (name.startswith("TRITON_") and name not in _NOT_CODE) or name in _SETTINGS:
            found.setdefault(name, value)
    return sorted(found.items())


def _globals(jit_fn: Any) -> list[tuple[str, str]]:
    # Filled by cache_key; deep copies of the values it saw.
    used = getattr(jit_fn, "used_global_vals", None) or {}
    return sorted((str(name), repr(value)) for (name, _), (value, _) in used.items())


def build_key(
    jit_fn: Any, sig: TritonSignature, arch: str, options: dict[str, Any]
) -> str | None:
    """The launcher's build key of ``jit_fn`` compiled for ``sig``, ``arch`` and
    ``options``; None when this process must not keep builds (IR overrides)."""
    if os.environ.get(_OVERRIDE, "0") not in ("", "0"):
        return None
    parts = {
        "kernel": jit_fn.cache_key,
        "globals": _globals(jit_fn),
        "signature": sorted(sig.signature.items()),
        "constexprs": sorted((k, repr(v)) for k, v in sig.constexprs.items()),
        "attrs": sorted([list(k), repr(v)] for k, v in sig.attrs.items()),
        "arch": arch,
        "options": sorted(options.items()),
        "triton": str(getattr(sys.modules.get("triton"), "__version__", "?")),
        "settings": _settings(),
    }
    return launcher_build_key("triton", parts)
