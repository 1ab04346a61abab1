"""Child of the warm-start tests (run as a script): one fresh process lowering the
catalog's ``scaled_add`` for CUDA with one GPU backend, no GPU needed.

``python warm_start_child.py BACKEND`` (``triton`` or ``numba_cuda``) imports what
the user's module would (JAX, the catalog, the backend's package), then — watching
from there on — traces and lowers a jitted call for ``cuda`` and prints one JSON
line: the times, the processes started (``subprocess.Popen``, ``os.system``,
``os.posix_spawn*``), the compiler calls (Triton's ``triton.compile``, Numba-CUDA's
``compile_ptx``), the compiler packages imported beyond the user's, and the launcher
kernel ids the program names. Run it with ``POLYKERNEL_CUDA_ARCH`` set.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from warm_start_support import watch_processes

#: The package the user's module imports itself, per backend.
PACKAGE = {"triton": "triton", "numba_cuda": "numba.cuda"}
#: Top-level packages of compilers (numba-cuda's own and CUDA Python included).
COMPILERS = ("numba", "llvmlite", "numba_cuda", "cuda", "triton", "warp")
KEYWORDS = {"triton": {"BLOCK": 1024, "num_warps": 4},
            "numba_cuda": {"threads_per_block": 256}}  # fmt: skip


def watch_compiler(backend: str, compiles: list[str]) -> None:
    """Record every call of the backend's compiler from now on."""
    module = importlib.import_module(PACKAGE[backend])
    name = "compile" if backend == "triton" else "compile_ptx"
    real = getattr(module, name)

    def spy(*args, **kw):
        compiles.append(name)
        return real(*args, **kw)

    setattr(module, name, spy)


def main(backend: str) -> None:
    import jax
    import numpy as np

    from polykernel.catalog import scaled_add_p

    importlib.import_module(PACKAGE[backend])  # the user's own import
    user = {m.split(".")[0] for m in sys.modules}
    started: list[str] = []
    compiles: list[str] = []
    watch_processes(started)
    watch_compiler(backend, compiles)
    x = np.ones(4096, np.float32)
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    keywords = {"backend": backend, **KEYWORDS[backend]}
    fn = jax.jit(lambda a, b: scaled_add_p(a, b, outs=spec, alpha=2.0, **keywords))
    t = time.perf_counter()
    traced = fn.trace(x, x)
    trace_s = time.perf_counter() - t
    t = time.perf_counter()
    lowered = traced.lower(lowering_platforms=("cuda",))
    lower_s = time.perf_counter() - t
    text = lowered.as_text()
    now = {m.split(".")[0] for m in sys.modules}
    print(json.dumps({
        "trace_ms": trace_s * 1e3,
        "lower_ms": lower_s * 1e3,
        "started": started,
        "compiles": compiles,
        "imported": sorted(p for p in COMPILERS if p in now - user),
        "kernels": sorted(set(re.findall(r"pkgpu_[0-9a-f]{32}", text))),
        "launcher": "polykernel_gpu_launch" in text,
    }))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
