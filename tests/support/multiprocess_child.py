"""One process of the multi-controller tests (run as a script).

``python multiprocess_child.py export FILE``: with 4 local CPU devices, export
``row_affine`` over them (in ``shard_map``) to ``FILE`` (what every process loads).

``python multiprocess_child.py run PROCESS_ID N_PROCESSES PORT FILE``: join JAX's
multi-controller runtime on loopback (gloo collectives, 2 CPU devices here), then on
a 4-device mesh across the processes run the C++ kernel ``kernel_library`` loaded
at import (before ``initialize``), the exported program, ``row_affine``
(``def_batch_partitioning``) and the catalog's ``csrmv`` (``A @ v``, ``A.T @ u``;
numba and cuda_raw), comparing this process's shards with NumPy. Prints one JSON
line: ``{"ok", "checks": {name: max abs error}, "numba": {target: origin},
"native": {module: built?}, "errors"}``.
"""

from __future__ import annotations

import json
import sys
import traceback

import numpy as np

TOLERANCE = 1e-4


def export(path: str) -> None:
    import jax

    jax.config.update("jax_num_cpu_devices", 4)
    import multiprocess_ops as ops
    from jax.sharding import NamedSharding, PartitionSpec as P

    import polykernel as pk

    mesh = jax.make_mesh((4,), ("i",))
    x, w = ops.row_affine_inputs()
    args = (
        jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, P("i"))),
        jax.ShapeDtypeStruct(w.shape, w.dtype, sharding=NamedSharding(mesh, P())),
    )
    # A sharded program exports through shard_map: jit's sharding rules rely on
    # custom_partitioning, whose Python callback cannot be serialized.
    program = jax.shard_map(ops.row_affine_block, mesh=mesh,
                            in_specs=(P("i"), P()), out_specs=P("i"))  # fmt: skip
    exported = pk.export(jax.jit(program))(*args)
    with open(path, "wb") as fh:
        fh.write(exported.serialize())
    print(json.dumps({"devices": exported.nr_devices}))


def _global(host: np.ndarray, sharding) -> object:
    import jax

    return jax.make_array_from_callback(host.shape, sharding, lambda i: host[i])


def _error(result, expected: np.ndarray) -> float:
    """Max abs error over this process's shards (each against its block)."""
    worst = 0.0
    for shard in result.addressable_shards:
        got = np.asarray(shard.data, np.float64)
        worst = max(worst, float(np.max(np.abs(got - expected[shard.index]))))
    return worst


def run(process_id: int, n_processes: int, port: int, artefact: str) -> dict:
    import kernel_library  # loads its C++ kernel at import, as libraries do
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        raise AssertionError("importing kernel_library started a JAX backend")
    import jax

    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=n_processes,
        process_id=process_id,
    )
    import multiprocess_ops as ops
    from jax.sharding import NamedSharding, PartitionSpec as P

    import polykernel as pk
    from polykernel.catalog import csrmv_p

    mesh = jax.make_mesh((jax.device_count(),), ("i",))
    rows, whole = NamedSharding(mesh, P("i")), NamedSharding(mesh, P())
    checks: dict[str, float] = {}
    x, w = ops.row_affine_inputs()
    gx, gw = _global(x, rows), _global(w, whole)
    want = ops.row_affine_expected(x, w)
    # The exported program first: its kernel comes back from a cache (the shared
    # one, or the exporter's as a read-only tier), not from running this module.
    with open(artefact, "rb") as fh:
        exported = pk.load_exported(fh.read())
    checks["exported"] = _error(jax.jit(exported.call)(gx, gw), want)
    checks["row_affine"] = _error(jax.jit(ops.row_affine_call)(gx, gw), want)

    # The library's C++ kernel, loaded before initialize, split by rows.
    lib_x = np.arange(ops.ROWS * ops.COLS, dtype=np.float32).reshape(ops.ROWS, -1)
    lib_y = jax.jit(kernel_library.call, out_shardings=rows)(_global(lib_x, rows))
    checks["library_cpp"] = _error(lib_y, kernel_library.expected(lib_x))

    csr, v, u = ops.csr_problem()
    a = ops.dense(csr)
    parts = [_global(p, whole) for p in csr]
    gv, gu = _global(v, whole), _global(u, rows)
    # Numba's serial kernels, pinned: the cache behaviour checked here is that of
    # kernels that can be cached (a parallel=True kernel's code depends on its
    # process, so it is never written to the disk cache), whatever the tuned table
    # would pick for this shape.
    pins = {"numba": {"parallel": False}, "cuda_raw": {}}

    def product(transpose: bool, b: str):
        n_out = ops.CSR_SHAPE[1 if transpose else 0]
        out = jax.ShapeDtypeStruct((n_out,), np.float32)
        return lambda d, i, p, x: csrmv_p(
            d, i, p, x, outs=out, shape=ops.CSR_SHAPE, transpose=transpose,
            backend=b, **pins[b],
        )  # fmt: skip

    for backend in ("numba", "cuda_raw"):
        mv = product(False, backend)
        tmv = product(True, backend)
        mv = jax.jit(mv, out_shardings=rows)
        checks[f"csrmv_{backend}"] = _error(mv(*parts, gv), a @ v)
        tmv = jax.jit(tmv)
        checks[f"csrmv_T_{backend}"] = _error(tmv(*parts, gu), a.T @ u)
    return checks


def _builds() -> tuple[dict[str, str], dict[str, bool]]:
    from polykernel.backends.cuda_raw.build import loaded_modules
    from polykernel.backends.numba.build import loaded_handler
    from polykernel.ffi import targets

    numba = {}
    for record in targets.records():
        handler = loaded_handler(record.name) if record.backend == "numba" else None
        if handler is not None:
            numba[record.label] = handler.origin
    native = {m.name: m.built for m in loaded_modules()}
    return numba, native


def main() -> None:
    if sys.argv[1] == "export":
        export(sys.argv[2])
        return
    process_id, n_processes, port = map(int, sys.argv[2:5])
    report: dict = {"ok": False, "checks": {}, "errors": []}
    try:
        report["checks"] = run(process_id, n_processes, port, sys.argv[5])
        report["ok"] = all(e <= TOLERANCE for e in report["checks"].values())
    except Exception:  # the parent prints it
        report["errors"].append(traceback.format_exc())
    report["numba"], report["native"] = _builds()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
