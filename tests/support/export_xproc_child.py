"""Child process for the cross-process ``jax.export`` tests (run as a script).

``python export_xproc_child.py export DIR JAX_CACHE`` defines the kernels (Numba
kernels, one of them ``parallel=True`` and one raising on x > 6, a C++ module, and
a primitive with a Numba CPU kernel and a pure-JAX GPU kernel), exports four
programs into ``DIR`` (``main``, ``multi`` for cpu+cuda, ``parallel``, ``checked``),
runs ``main`` once with JAX's persistent compilation cache in ``JAX_CACHE`` and
prints one JSON line.

``... export DIR JAX_CACHE cuda`` exports ``cuda_multi`` instead: cpu+cuda with a
C++ kernel on the CPU and an nvcc-built one on the GPU.

``python export_xproc_child.py run DIR JAX_CACHE NAME...`` imports no kernel code:
it loads each ``DIR/NAME.jaxexport`` with ``pk.load_exported``, runs it with the
persistent cache on and prints one JSON line per program; a failure prints the
exception's type and message instead. The name ``+define`` then defines the
kernels in that process and runs ``main``'s function directly.

Each JSON line has ``out`` (the result), ``hits``/``misses`` (JAX persistent cache
events during that run) and ``targets``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import polykernel as pk

N = 8
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
CPP = """
void add_one(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] + 1;
}
"""
CUDA = """
__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1;
}
void add_one(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream) {
  int64_t n = x.numel();
  add_one_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(),
                                                       y.data_ptr<float>(), n);
}
"""
_events: list[str] = []


def _listen(event: str, **_: object) -> None:
    _events.append(event)


def _use_persistent_cache(directory: Path) -> None:
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.monitoring.register_event_listener(_listen)


def _run(exported: jax.export.Exported) -> dict:
    _events.clear()
    x = np.arange(N, dtype=np.float32)  # no compile of its own
    out = jax.jit(exported.call)(x)
    return {
        "out": np.asarray(out).tolist(),
        "hits": _events.count("/jax/compilation_cache/cache_hits"),
        "misses": _events.count("/jax/compilation_cache/cache_misses"),
        "targets": pk.exported_targets(exported),
    }


def _programs() -> dict:
    import numba

    @numba.njit
    def twice(x, out):
        for i in range(out.size):
            out[i] = 2 * x[i]

    @numba.njit(parallel=True)
    def thrice(x, out):
        for i in numba.prange(out.size):
            out[i] = 3 * x[i]

    @numba.njit
    def checked(x, out):  # raises with run-time values: needs a Numba environment
        for i in range(out.size):
            if x[i] > 6:
                raise ValueError("too large at", i, x[i])
            out[i] = x[i]

    double = pk.numba_kernel(twice, SPEC)
    mod = pk.load_cpp_inline("xproc_mod", CPP, ["add_one"])
    op = pk.XLACustomKernel("test.xproc.multi")
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(twice, outs))
    op.def_kernel("jax_raw", "gpu", lambda outs, **kw: lambda x: x * 5)
    return {
        "main": (lambda x: mod.add_one(double(x), outs=SPEC), None),
        "multi": (lambda x: op(x, outs=SPEC), ("cpu", "cuda")),
        "parallel": (pk.numba_kernel(thrice, SPEC), None),
        "checked": (pk.numba_kernel(checked, SPEC), None),
    }


def _cuda_program() -> dict:
    """cpu+cuda, a C++ kernel on each (nvcc builds the CUDA one for sm_80)."""
    options = pk.CompileOptions(cuda_arch=["sm_80"])
    cpu = pk.load_cpp_inline("xproc_mod", CPP, ["add_one"])
    gpu = pk.load_cuda_inline("xproc_cuda", CUDA, ["add_one"], options=options)
    op = pk.XLACustomKernel("test.xproc.cuda")
    for platform, mod in (("cpu", cpu), ("gpu", gpu)):
        op.def_cuda_raw_kernel(
            lambda outs, mod=mod, **kw: lambda x: mod.add_one(x, outs=list(outs)),
            platform=platform,
        )
    return {"cuda_multi": (lambda x: op(x, outs=SPEC), ("cpu", "cuda"))}


def export(directory: Path, jax_cache: Path, cuda: bool = False) -> None:
    _use_persistent_cache(jax_cache)
    programs = _cuda_program() if cuda else _programs()
    result = {}
    for name, (fn, platforms) in programs.items():
        exported = pk.export(jax.jit(fn), platforms=platforms)(SPEC)
        (directory / f"{name}.jaxexport").write_bytes(exported.serialize())
        if name == "main":
            result = _run(exported)
    print(json.dumps(result))


def run(directory: Path, jax_cache: Path, names: list[str]) -> None:
    _use_persistent_cache(jax_cache)
    for name in names:
        if name == "+define":
            print(json.dumps(_define_after_loading()))
            continue
        _events.clear()
        try:
            exported = pk.load_exported((directory / f"{name}.jaxexport").read_bytes())
            result = _run(exported)
        except Exception as err:  # reported to the test, which checks it
            misses = _events.count("/jax/compilation_cache/cache_misses")
            result = {
                "error": type(err).__name__,
                "message": str(err),
                "misses": misses,
            }
        result["numba_kernels_defined"] = "twice" in dir(sys.modules[__name__])
        result["registered"] = pk.list_registered_targets()
        print(json.dumps(result))


def _define_after_loading() -> dict:
    """Define the kernels after their targets were loaded: same names, reused."""
    fn, _ = _programs()["main"]
    before = pk.list_registered_targets()
    _events.clear()
    out = jax.jit(fn)(np.arange(N, dtype=np.float32))
    return {
        "out": np.asarray(out).tolist(),
        "unchanged": before == pk.list_registered_targets(),
        "misses": _events.count("/jax/compilation_cache/cache_misses"),
    }


if __name__ == "__main__":
    command, directory, jax_cache = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if command == "export":
        export(directory, jax_cache, cuda=sys.argv[4:] == ["cuda"])
    else:
        run(directory, jax_cache, sys.argv[4:])
