"""Child process of ``test_linked.py``: a Warp CPU kernel's first result, observed.

``python linked_child.py MODE [DIR]`` prints one JSON line. Modes:

- ``user``: what a user's module does: import Warp, define a kernel, call it
  through ``pk.warp_kernel`` under ``jax.jit``;
- ``user-nolinker``: the same where no C compiler can link (the JIT fallback);
- ``catalog``: the catalog's ``scaled_add`` on the ``warp`` backend;
- ``export DIR``: ``user``, then the program exported to ``DIR/warp.jaxexport``
  (``export-nolinker``: built where no C compiler can link); the report is the
  ``user`` part's, taken before the export (``test_linked.py`` counts on it);
- ``run DIR``: with ``warp`` and ``llvmlite`` not importable, load that program
  with ``pk.load_exported`` and run it (``run-llvmlite``: only ``warp`` is not
  importable).

Each reports the result, the target and its artefact, whether llvmlite was
imported, whether Warp's runtime started or Warp built a module, and every
process started (a ``Popen`` hook installed before this script's first import).
``test_linked.py`` runs it in a zygote child: NumPy, JAX and polykernel are imported
already, and importing them starts no process and imports neither Warp nor llvmlite,
so the hook and the ``sys.modules`` entries below see what they would in a fresh one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

spawned: list[str] = []
_popen = subprocess.Popen.__init__


def _counting(self, args, *rest, **kw):
    spawned.append(str(args if isinstance(args, str) else args[0]))
    _popen(self, args, *rest, **kw)


subprocess.Popen.__init__ = _counting  # type: ignore[method-assign]
MODE = sys.argv[1]
if MODE.startswith("run"):  # Warp (and llvmlite) cannot be imported here
    sys.modules["warp"] = None  # type: ignore[assignment]
    if MODE == "run":
        sys.modules["llvmlite"] = None  # type: ignore[assignment]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import polykernel as pk  # noqa: E402
from polykernel.ffi import targets  # noqa: E402

N = 16
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
X = np.arange(N, dtype=np.float32)

if not MODE.startswith("run"):
    import warp as wp

    @wp.kernel
    def axpy(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
             alpha: wp.float32, out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = alpha * x[i] + y[i]


def _no_linker() -> None:
    import polykernel.native.link as link
    from polykernel.errors import HostCompilerNotFoundError

    def missing() -> str:
        raise HostCompilerNotFoundError("no compiler (test)")

    link.find_linker = missing  # type: ignore[assignment]


def _call(fn) -> list[float]:
    return np.asarray(jax.jit(fn)(X, np.ones(N, np.float32))).tolist()


def _report(out: list[float]) -> dict:
    names = [t for t in pk.list_registered_targets() if t.startswith("pk_warp_")]
    record = targets.lookup(names[0], "cpu") if names else None
    artefact = record.artefact if record is not None else None
    context = sys.modules.get("warp._src.context")
    return {
        "out": out,
        "targets": names,
        "artefact": artefact.to_json() if artefact is not None else None,
        "portable": record.portable if record is not None else None,
        "llvmlite": sys.modules.get("llvmlite") is not None,
        "warp_runtime": getattr(context, "runtime", None) is not None,
        "spawned": spawned,
    }


def main() -> None:
    if MODE in ("user", "user-nolinker", "export", "export-nolinker"):
        if MODE.endswith("-nolinker"):
            _no_linker()
        f = pk.warp_kernel(axpy, SPEC)
        report = _report(_call(lambda x, y: f(x, y, alpha=2.0)))
        report["warp_built"] = bool(axpy.module.execs)
        if MODE.startswith("export"):
            exported = pk.export(jax.jit(lambda x: f(x, x, alpha=3.0)))(SPEC)
            Path(sys.argv[2], "warp.jaxexport").write_bytes(exported.serialize())
    elif MODE == "catalog":
        from polykernel.catalog import scaled_add_p

        report = _report(_call(lambda x, y: scaled_add_p(
            x, y, outs=SPEC, alpha=2.0, backend="warp")))  # fmt: skip
        module = sys.modules["polykernel.catalog._warp"]._kernels().scaled_add.module
        report["warp_built"] = bool(module.execs)
    else:
        blob = Path(sys.argv[2], "warp.jaxexport").read_bytes()
        exported = pk.load_exported(blob)
        report = _report(np.asarray(exported.call(X)).tolist())
        report["warp_imported"] = sys.modules.get("warp") is not None
    print(json.dumps(report))


if __name__ == "__main__":
    main()
