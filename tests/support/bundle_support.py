"""Kernel bundles in fresh processes: write one with every CPU backend, and load it
in a bare virtualenv (jax, jaxlib, NumPy and polykernel only; no compiler on PATH).

``python bundle_support.py write OUT.pkb`` (a child): a program calling a C++, a
Numba serial, a Numba ``parallel=True`` and a Warp CPU kernel, bundled, with its
inputs and expected output saved beside it (``OUT.npz``).
``python bundle_support.py load OUT.pkb`` (a child in the bare virtualenv): load,
call, compare; prints one JSON line (timings, modules, result).
``python bundle_support.py write-gpu OUT.pkb`` (a child; no GPU needed, run with
``POLYKERNEL_CUDA_ARCH``): a program for CUDA calling a C++/CUDA kernel (cubins and
PTX in its library) and a Triton kernel (launched by the GPU launcher), bundled.
``python bundle_support.py load-gpu OUT.pkb``: load it; on a GPU also run it and
compare with NumPy; one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: The distributions a bare virtualenv gets: what jax needs to import and run.
BARE_PACKAGES = ("jax", "jaxlib", "numpy", "ml_dtypes", "opt_einsum", "scipy",
                 "flatbuffers")
COMPILERS = ("numba", "llvmlite", "warp", "triton")
N = 1000

CPP = r"""
void twice(const pk::Tensor& x, pk::Tensor& out) {
  const float* a = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = 2.0f * a[i];
}
"""


def _program():
    import jax
    import jax.numpy as jnp
    import numba
    import numpy as np
    import warp as wp

    import polykernel as pk

    spec = jax.ShapeDtypeStruct((N,), jnp.float32)
    cpp = pk.load_cpp_inline("bundle_twice", CPP, ["twice"])

    @numba.njit
    def plus_one(x, out):
        for i in range(out.size):
            out[i] = x[i] + 1.0

    @numba.njit(parallel=True)
    def squared(x, out):
        for i in numba.prange(out.size):
            out[i] = x[i] * x[i]

    @wp.kernel
    def minus(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
              out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = x[i] - y[i]

    serial = pk.numba_kernel(plus_one, spec)
    parallel = pk.numba_kernel(squared, spec)
    warp = pk.warp_kernel(minus, spec)

    def program(x):
        a = cpp.twice(x, outs=spec)
        b = serial(a)
        c = parallel(b)
        return warp(c, a)

    x = np.linspace(-1.0, 1.0, N, dtype=np.float32)
    return jax.jit(program), x, spec


CUDA = r"""
__global__ void twice_kernel(const float* x, float* o, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) o[i] = 2.0f * x[i];
}
void twice(const pk::Tensor& x, pk::Tensor& out, cudaStream_t stream) {
  int64_t n = out.numel();
  twice_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(),
                                                   out.data_ptr<float>(), n);
}
"""


def _gpu_program():
    import jax
    import jax.numpy as jnp

    import polykernel as pk
    from polykernel.catalog import scaled_add_p

    spec = jax.ShapeDtypeStruct((N,), jnp.float32)
    options = pk.CompileOptions(cuda_arch=["sm_80"])  # + compute_80 PTX
    cuda = pk.load_cuda_inline("bundle_gpu_twice", CUDA, ["twice"], options=options)

    def program(x):
        a = cuda.twice(x, outs=spec)  # 2x
        return scaled_add_p(a, x, outs=spec, alpha=3.0, backend="triton")  # 7x

    return jax.jit(program), spec


def write_gpu(path: str) -> None:
    import polykernel as pk

    fn, spec = _gpu_program()
    pk.export_bundle(fn, path, spec, platforms=["cuda"])
    print(json.dumps({"written": path, "size": os.path.getsize(path)}))


def load_gpu(path: str) -> None:
    import jax
    import numpy as np

    import polykernel as pk

    started = time.perf_counter()
    bundle = pk.load_bundle(path)
    loaded = time.perf_counter()
    result = {
        "load_s": loaded - started,
        "kernels": list(bundle.kernels),
        "gpu_kernels": list(bundle.gpu_kernels),
        "compilers": [m for m in COMPILERS if m in sys.modules],
        "ran": False,
    }
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if gpus:
        x = np.linspace(-1.0, 1.0, N, dtype=np.float32)
        got = np.asarray(bundle(jax.device_put(x, gpus[0])))
        result.update(ran=True, max_error=float(np.max(np.abs(got - 7 * x))))
    print(json.dumps(result))


def write(path: str) -> None:
    import numpy as np

    import polykernel as pk

    fn, x, spec = _program()
    expected = np.asarray(fn(x))
    pk.export_bundle(fn, path, spec)
    np.savez(Path(path).with_suffix(".npz"), x=x, expected=expected)
    print(json.dumps({"written": path, "size": os.path.getsize(path)}))


def load(path: str) -> None:
    started = time.perf_counter()
    import numpy as np

    import polykernel as pk

    imported = time.perf_counter()
    bundle = pk.load_bundle(path)
    loaded = time.perf_counter()
    data = np.load(Path(path).with_suffix(".npz"))
    got = np.asarray(bundle(data["x"]))
    print(json.dumps({
        "import_s": imported - started,
        "load_s": loaded - imported,
        "kernels": list(bundle.kernels),
        "equal": bool(np.array_equal(got, data["expected"])),
        "max_error": float(np.max(np.abs(got - data["expected"]))),
        "compilers": [m for m in COMPILERS if m in sys.modules],
    }))  # fmt: skip


def bare_venv(root: Path, python: str = sys.executable) -> Path:
    """A virtualenv (no pip) seeing only ``BARE_PACKAGES`` of ``python``'s
    site-packages and polykernel's source: its interpreter's path."""
    found = subprocess.run(
        [python, "-c", "import jax, os; print(os.path.dirname(os.path.dirname("
         "jax.__file__)))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(found)
    subprocess.run([python, "-m", "venv", "--without-pip", str(root)], check=True)
    bare = root / "bare-site"
    bare.mkdir()
    for entry in site.iterdir():
        top = entry.name.split("-")[0].split(".")[0].lower()
        if top in BARE_PACKAGES:
            (bare / entry.name).symlink_to(entry)
    src = Path(__file__).resolve().parents[2] / "src"
    pure = subprocess.run(
        [str(root / "bin" / "python"), "-c",
         "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(pure, "polykernel-bare.pth").write_text(f"{bare}\n{src}\n")
    return root / "bin" / "python"


if __name__ == "__main__":
    modes = {"write": write, "load": load, "write-gpu": write_gpu,
             "load-gpu": load_gpu}  # fmt: skip
    modes[sys.argv[1]](sys.argv[2])
