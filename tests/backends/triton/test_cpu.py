"""Kernels decorated under ``TRITON_INTERPRET=1`` work on the CPU as without it.

``TRITON_INTERPRET=1`` is how Triton's own documentation runs kernels on a CPU:
``@triton.jit`` then returns an ``InterpretedFunction``. polykernel accepts it and
runs it exactly like a ``JITFunction`` (eager, ``jit``, ``vmap``, ``check_kernel``);
compiling one for a GPU works without ``@triton.jit`` helpers, and with them fails
with an error saying why and what to do. The variable must be set before Triton is
imported, so each case runs in a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent('''
    import json
    import jax, jax.numpy as jnp, numpy as np
    import triton, triton.language as tl
    import polykernel as pk

    @triton.jit
    def twice(v):
        return v * 2

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(out_ptr + offs, alpha * twice(x) + tl.load(y_ptr + offs, mask=m),
                 mask=m)

    @triton.jit
    def plain(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 3 * tl.load(x_ptr + offs))

    N = 50
    spec = jax.ShapeDtypeStruct((N,), jnp.float32)
    f = pk.triton_kernel(axpy, spec, grid=lambda m: (triton.cdiv(m["n"], m["BLOCK"]),),
                         BLOCK=16)
    x, y = jnp.arange(N, dtype=jnp.float32), jnp.ones(N, jnp.float32)
    want = np.asarray(x + y)
    report = {"decorated": type(axpy).__name__}
    report["eager"] = bool(np.allclose(f(x, y, n=N, alpha=0.5), want))
    report["jit"] = bool(np.allclose(
        jax.jit(lambda a, b: f(a, b, n=N, alpha=0.5))(x, y), want))
    report["vmap"] = bool(np.allclose(jax.vmap(
        lambda a, b: f(a, b, n=N, alpha=0.5))(jnp.stack([x, x]), jnp.stack([y, y])),
        np.stack([want, want])))
    op = pk.XLACustomKernel("interp.axpy")
    op.def_kernel("triton", "cpu",
                  lambda outs, **kw: lambda a, b: f(a, b, n=N, alpha=0.5))
    op.def_jax_raw_kernel(lambda outs, **kw: lambda a, b: a + b)
    report["check_kernel"] = pk.testing.check_kernel(
        op, x, y, outs=spec, backends=["triton"], reference="jax_raw",
        checks=["backend_vs_reference", "jit_vs_eager", "vmap_vs_loop"]).ok
    try:
        pk.triton_kernel(axpy, spec, grid=1, BLOCK=16)(x, y, n=N, alpha=None)
    except pk.KernelCallError as err:
        report["refused"] = str(err)
    g = pk.triton_kernel(plain, jax.ShapeDtypeStruct((16,), jnp.float32), grid=1,
                         BLOCK=16)
    sig = g.signature(["float32"], {})
    report["gpu_compile"] = g.gpu_kernel([((16,), "float32")], sig, (1, 1, 1),
                                         arch="90").kernel_id
    sig = f.signature(["float32", "float32"], {"n": np.int32(N),
                                                "alpha": np.float32(0.5)})
    try:
        f.gpu_kernel([((N,), "float32")] * 2, sig, (4, 1, 1), arch="90")
    except pk.KernelCompilationError as err:
        report["gpu_helper_error"] = str(err)
    print(json.dumps(report))
''')


@pytest.mark.slow
def test_triton_interpret_kernels_run_like_jit_kernels(tmp_path, run_env):
    env = {**run_env, "TRITON_INTERPRET": "1"}
    script = tmp_path / "probe.py"  # Triton reads kernels' source from their file
    script.write_text(PROBE)
    proc = subprocess.run([sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["decorated"] == "InterpretedFunction"
    assert report["eager"] and report["jit"] and report["vmap"]
    assert report["check_kernel"] is True
    assert "attribute 'alpha'=None cannot be converted to a scalar" in report["refused"]
    assert report["gpu_compile"].startswith("pkgpu_")
    message = report["gpu_helper_error"]
    assert "TRITON_INTERPRET=1 is set in this process" in message
    assert "Unset TRITON_INTERPRET in processes that run Triton kernels on a GPU" in (
        message
    )
