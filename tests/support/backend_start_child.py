"""One process of ``test_backend_start.py`` (run as a script; a zygote child there).

``python backend_start_child.py CASE [FILE]`` does what a library does at import time
(the action named ``CASE``: load a C++ or CUDA module, load or revive an exported
program, make a kernel of each backend), checks that no JAX backend has started,
then does what the library's user does afterwards: ``jax_num_cpu_devices`` and
``jax.distributed.initialize`` (one process, loopback), and runs what was loaded on
2 CPU devices. Prints one JSON line: ``{"started_by_load": bool, "devices": n,
"checks": {name: max abs error}, "made": [backends whose kernels were made]}``.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import polykernel as pk

CPP = r"""
void twice(const pk::Tensor& x, pk::Tensor& out) {
  const float* a = x.data_ptr<float>(); float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = 2.0f * a[i];
}
"""
CUDA = r"""
__global__ void twice_kernel(const float* a, float* o, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) o[i] = 2.0f * a[i];
}
void twice(const pk::Tensor& x, pk::Tensor& out, cudaStream_t stream) {
  const int64_t n = out.numel();
  twice_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
      x.data_ptr<float>(), out.data_ptr<float>(), n);
}
"""
N = 8
X = np.arange(N, dtype=np.float32)
MADE: list[str] = []  # the backends whose kernels were constructed


def _spec() -> Any:
    import jax

    return jax.ShapeDtypeStruct((N,), np.float32)


def _twice_numba(x, out):  # an @njit kernel once numba is imported
    for i in range(out.size):
        out[i] = 2.0 * x[i]


def _double_pallas(x_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...]


def cpp(auto_register: bool = True) -> Callable[[], dict[str, float]]:
    mod = pk.load_cpp_inline(
        "backend_start.twice", CPP, ["twice"], auto_register=auto_register
    )
    return lambda: {"cpp": _error(mod.twice(X, outs=_spec()), 2 * X)}


def cuda() -> Callable[[], dict[str, float]]:
    pk.load_cuda_inline("backend_start.twice_cuda", CUDA, ["twice"])
    # Registered for CUDA, where no GPU runs it: the check is that it is listed.
    return lambda: {"cuda_targets_missing": float(not pk.list_registered_targets())}


CLIP = r"""
void clip5(const pk::Tensor& x, pk::Tensor& out) {
  const float* a = x.data_ptr<float>(); float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[i] = a[i] < -1 ? -1 : (a[i] > 5 ? 5 : a[i]);
}
"""


def export(path: str) -> None:
    """Write a program calling a Numba and a C++ kernel (not a checked case)."""
    import jax
    import numba

    double = pk.numba_kernel(numba.njit(_twice_numba), _spec())
    clip = pk.load_cpp_inline("backend_start.clip", CLIP, ["clip5"])
    program = pk.export(jax.jit(lambda x: clip.clip5(double(x), outs=_spec())))
    with open(path, "wb") as fh:
        fh.write(program(_spec()).serialize())


def exported(path: str, revive_only: bool) -> Callable[[], dict[str, float]]:
    with open(path, "rb") as fh:
        blob = fh.read()
    if revive_only:
        import jax.export

        program = jax.export.deserialize(bytearray(blob))
        pk.register_exported_targets(program)
    else:
        program = pk.load_exported(blob)
    return lambda: {"exported": _error(program.call(X), np.clip(2 * X, -1, 5))}


def constructors() -> Callable[[], dict[str, float]]:
    """Every built-in backend's kernel made, as a generator does at import."""
    import numba

    kernels = {"numba": pk.numba_kernel(numba.njit(_twice_numba), _spec())}
    kernels["pallas"] = pk.pallas_kernel(_double_pallas, _spec())
    MADE.extend(["numba", "pallas"])
    for name, make in _optional_constructors().items():
        make()
        MADE.append(name)
    op = pk.XLACustomKernel("backend_start.op")
    op.def_numba_kernel(lambda outs, **kw: kernels["numba"])
    op.def_pallas_kernel("cpu", lambda outs, **kw: kernels["pallas"])

    def run() -> dict[str, float]:
        checks = {n: _error(k(X), 2 * X) for n, k in kernels.items()}
        for backend in ("numba", "pallas"):
            checks[f"op_{backend}"] = _error(
                op(X, outs=_spec(), backend=backend), 2 * X
            )
        return checks

    return run


def _optional_constructors() -> dict[str, Callable[[], Any]]:
    import importlib.util

    found: dict[str, Callable[[], Any]] = {}
    if importlib.util.find_spec("warp") is not None:

        def warp() -> Any:
            import warp as wp

            @wp.kernel
            def twice(x: wp.array(dtype=wp.float32), o: wp.array(dtype=wp.float32)):
                i = wp.tid()
                o[i] = 2.0 * x[i]

            return pk.warp_kernel(twice, outs=_spec(), launch_dims=(N,))

        found["warp"] = warp
    if importlib.util.find_spec("triton") is not None:

        def triton() -> Any:
            import triton
            import triton.language as tl

            @triton.jit
            def twice(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
                i = tl.arange(0, BLOCK)
                tl.store(o_ptr + i, 2.0 * tl.load(x_ptr + i, mask=i < n), mask=i < n)

            return pk.triton_kernel(twice, outs=_spec(), grid=(1,), BLOCK=N)

        found["triton"] = triton

    def numba_cuda() -> Any:
        from numba import cuda

        @cuda.jit
        def twice(x, o):
            i = cuda.grid(1)
            if i < o.size:
                o[i] = 2.0 * x[i]

        return pk.numba_cuda_kernel(twice, outs=_spec(), grid=1, block=N)

    if importlib.util.find_spec("numba_cuda") is not None:
        found["numba_cuda"] = numba_cuda
    return found


def _error(got: Any, want: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    case, rest = sys.argv[1], sys.argv[2:]
    if case == "export":
        return export(rest[0])
    actions: dict[str, Callable[[], Callable[[], dict[str, float]]]] = {
        "load_cpp_inline": cpp,
        "load_cpp_inline_no_register": lambda: cpp(auto_register=False),
        "load_cuda_inline": cuda,
        "load_exported": lambda: exported(rest[0], revive_only=False),
        "register_exported_targets": lambda: exported(rest[0], revive_only=True),
        "constructors": constructors,
    }
    run = actions[case]()  # what a library does at import
    from jax._src import xla_bridge

    started = xla_bridge.backends_are_initialized()
    import jax

    # What its user does next, which needs JAX not to have started.
    jax.config.update("jax_num_cpu_devices", 2)
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{_port()}", num_processes=1, process_id=0
    )
    report = {"started_by_load": started, "devices": jax.device_count(),
              "checks": run(), "made": MADE}  # fmt: skip
    jax.distributed.shutdown()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
