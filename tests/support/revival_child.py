"""Child process for the export-revival tests (run as a script).

``python revival_child.py warp DIR`` defines a Warp kernel behind a primitive, exports
a CPU program to ``DIR/warp.jaxexport`` and prints one JSON line (its targets).

``python revival_child.py cuda DIR`` pins sm_90 and exports, for ``cuda``, a program
calling a ``numba_cuda_kernel`` (through the GPU launcher) and a
``numba_cuda_callable`` (its own CUDA handler) to ``DIR/cuda.jaxexport``; prints the
targets and the launcher's kernel ids.

``python revival_child.py run DIR NAME [MODULE]`` imports no kernel code (but
``MODULE`` if given), loads ``DIR/NAME.jaxexport`` with ``pk.load_exported`` and, for
``warp``, runs it; prints the result, or the exception's type and message.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import polykernel as pk

N = 8
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
X = np.arange(N, dtype=np.float32)


def export_warp(directory: Path) -> dict:
    import warp as wp

    wp.config.quiet = True

    @wp.kernel
    def axpy(x: wp.array(dtype=wp.float32), alpha: wp.float32,
             out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = alpha * x[i] + 1.0

    op = pk.XLACustomKernel("revival.warp_axpy")
    def generator(outs, alpha, **kw):
        kernel = pk.warp_kernel(axpy, outs[0])
        return lambda x: kernel(x, alpha=alpha)

    op.def_kernel("warp", "cpu", generator)
    exported = pk.export(jax.jit(lambda x: op(x, outs=[SPEC], alpha=3.0)[0]))(SPEC)
    (directory / "warp.jaxexport").write_bytes(exported.serialize())
    return {"targets": pk.exported_targets(exported), "out": exported.call(X).tolist()}


def export_cuda(directory: Path) -> dict:
    import revival_callables as rc

    from polykernel.launcher import registered_gpu_kernels

    pk.config.set_compute_capability("9.0")
    op = pk.XLACustomKernel("revival.cuda")
    op.def_numba_cuda_kernel(
        lambda outs, **kw: lambda x: [
            pk.numba_cuda_kernel(rc.add_one, outs[0], launch_dims=N)(x),
            pk.numba_cuda_callable(rc.add_one_twice, outs[1])(x),
        ]
    )
    exported = pk.export(jax.jit(lambda x: op(x, outs=[SPEC, SPEC])),
                         platforms=("cuda",))(SPEC)  # fmt: skip
    (directory / "cuda.jaxexport").write_bytes(exported.serialize())
    return {
        "targets": pk.exported_targets(exported),
        "kernels": sorted(registered_gpu_kernels()),
        "registered": pk.list_registered_targets(),
    }


def run(directory: Path, name: str, module: str | None) -> dict:
    if module:
        sys.path.insert(0, str(Path(__file__).parent))
        importlib.import_module(module)
    blob = (directory / f"{name}.jaxexport").read_bytes()
    try:
        exported = pk.load_exported(blob)
        result: dict = {"registered": pk.list_registered_targets()}
        if name == "warp":
            result["out"] = np.asarray(exported.call(X)).tolist()
        else:
            from polykernel.launcher import registered_gpu_kernels

            result["kernels"] = sorted(registered_gpu_kernels())
        return result
    except Exception as err:  # report it to the test
        return {"error": type(err).__name__, "message": str(err)}


def main() -> None:
    mode, directory = sys.argv[1], Path(sys.argv[2])
    if mode == "warp":
        print(json.dumps(export_warp(directory)))
    elif mode == "cuda":
        print(json.dumps(export_cuda(directory)))
    else:
        module = sys.argv[4] if len(sys.argv) > 4 else None
        print(json.dumps(run(directory, sys.argv[3], module)))


if __name__ == "__main__":
    main()
