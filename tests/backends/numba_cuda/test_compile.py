"""The GPU path of ``numba_cuda_kernel``, checked without a GPU: PTX, cubins, lowering.

Here the kernel is compiled for ``sm_80`` and ``sm_90`` (NVVM from the CUDA 13
extra; cubins linked by nvJitLink), registered with the native launcher, and a
``jit`` program is lowered for CUDA: its call is the launcher's custom call, whose
handler is machine code in the launcher library (no Python callback). Launches are
the ``gpu`` tests at the end (``make test-gpu``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numba import cuda

import polykernel as pk
from polykernel.backends.numba_cuda.compile import compile_kernel
from polykernel.launcher import GRAPH_TARGET, launcher_library, registered_gpu_kernels
from polykernel.launcher.kernels import _KINDS

F32 = jnp.float32


@cuda.jit
def axpy(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2.0 * x[i] + y[i]


@pytest.fixture
def pinned_arches():
    pk.config.set_compute_capability(["80", "90"])
    yield
    pk.config.set_compute_capability(None)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["80", "90"])
def test_ptx_and_cubin_for_the_architecture(arch):
    entry, images = compile_kernel(axpy, ("float32",) * 3, (1, 1, 1), arch)
    kinds = {im.kind: im for im in images}
    assert set(kinds) <= set(_KINDS) and "ptx" in kinds
    ptx = kinds["ptx"].data.decode()
    assert f".target sm_{arch}" in ptx and f".entry {entry}(" in ptx
    assert ptx.count(".param .u64") == 3 * 7  # three 1-D arrays, Numba's ABI
    if "cubin" in kinds:  # nvJitLink is part of the numba-cuda[cu13] extra
        assert kinds["cubin"].data[:4] == b"\x7fELF"


@cuda.jit
def scaled(x, out, alpha, n, flag):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = alpha * x[i] + n + (1.0 if flag else 0.0)


@pytest.mark.slow
def test_scalar_parameters_are_compiled_after_the_arrays_by_value():
    _entry, images = compile_kernel(scaled, ("float32",) * 2, (1, 1), "90",
                                   ("float64", "int64", "bool"))  # fmt: skip
    ptx = next(im for im in images if im.kind == "ptx").data.decode()
    params = [line.split()[1] for line in ptx.splitlines()
              if line.strip().startswith(".param")]  # fmt: skip
    assert params == [".u64"] * (2 * 7) + [".f64", ".u64", ".u8"]


external = cuda.declare_device("pk_external_add", "float32(float32)")


@cuda.jit
def needs_linking(x, out):
    out[0] = external(x[0])


@cuda.jit
def prints(x, out):
    print(x[0])  # vprintf: resolved by the driver, no linking needed
    out[0] = x[0]


@pytest.mark.slow
def test_kernels_that_need_linking_are_refused_but_printf_is_fine():
    from polykernel.errors import KernelCompilationError

    with pytest.raises(KernelCompilationError, match=r"must be linked from other "
                       r"files \(pk_external_add\).*numba_cuda_callable"):  # fmt: skip
        compile_kernel(needs_linking, ("float32", "float32"), (1, 1), "90")
    entry, _ = compile_kernel(prints, ("float32", "float32"), (1, 1), "90")
    assert "prints" in entry


@functools.cache
def _primitive():
    def kg(outs, **kw):
        return pk.numba_cuda_kernel(axpy, outs[0], launch_dims=outs[0].shape[0])

    op = pk.XLACustomKernel("test_numba_cuda_compile.axpy")
    op.def_numba_cuda_kernel(kg)
    op.def_kernel("numba_cuda", "cpu", kg)
    return op


@pytest.mark.slow
def test_the_gpu_handler_is_the_native_launcher(pinned_arches):
    op = _primitive()
    x = jnp.arange(300, dtype=F32)

    def f(x):
        return op(x, x, outs=[jax.ShapeDtypeStruct((300,), F32)])[0]

    text = jax.jit(f).trace(x).lower(lowering_platforms=("cuda",)).as_text()
    assert f"custom_call @{GRAPH_TARGET}(" in text
    assert "callback" not in text  # no host callback in the program
    # Other tests of this file register axpy for other arches: take the one called.
    called = [
        k
        for k in registered_gpu_kernels().values()
        if k.name == "axpy" and k.kernel_id in text
    ]
    assert len(called) == 1
    kernel = called[0]
    assert kernel.spec.grid == (2, 1, 1)
    assert {(im.kind, im.arch) for im in kernel.images} >= {
        ("ptx", "80"),
        ("ptx", "90"),
    }
    lib = launcher_library()
    assert lib.contains(lib.launch)  # the registered address is machine code
    cpu = jax.jit(f).trace(x).lower(lowering_platforms=("cpu",)).as_text()
    assert "callback" in cpu  # the CPU lowering is the simulator's callback
    np.testing.assert_allclose(jax.jit(f)(x), 3 * np.arange(300))


@pytest.mark.slow
def test_the_launcher_packs_numbas_array_abi_for_each_batch_element(pinned_arches):
    import struct

    from polykernel.ffi import abi

    op = _primitive()
    x = jnp.zeros(300, F32)
    outs = [jax.ShapeDtypeStruct((300,), F32)]
    jax.jit(lambda x: op(x, x, outs=outs)).trace(x).lower(lowering_platforms=("cuda",))
    kernels = registered_gpu_kernels().values()
    kernel = next(k for k in kernels if k.spec.buffers[0].shape == (300,))
    f32 = abi.DTYPE_CODES["float32"]
    size = kernel.spec.template_size()
    lib = launcher_library()
    shapes = [(1, 300), (2, 300), (2, 300)]  # vmap: x broadcast, y and out batched
    blobs = lib.plan_launches(kernel.kernel_id, [f32] * 3, shapes,
                              [0x10000, 0x20000, 0x30000], size)  # fmt: skip
    assert len(blobs) == 2
    for b, blob in enumerate(blobs):
        words = struct.unpack("<21q", blob)
        row = 300 * 4 * b
        assert words == (0, 0, 300, 4, 0x10000, 300, 4,  # meminfo .. strides
                         0, 0, 300, 4, 0x20000 + row, 300, 4,
                         0, 0, 300, 4, 0x30000 + row, 300, 4)  # fmt: skip


@pytest.mark.slow
def test_numpy_shim_lets_numba_cuda_compile_without_row_stack(run_env):
    import textwrap

    import zygote

    script = textwrap.dedent("""
        import sys
        import numpy as np
        from polykernel.backends.numba_cuda.numpy_shim import apply_numpy_shim
        np.__dict__.pop("row_stack", None)  # what NumPy >= 2.5 looks like
        np.__all__ = [n for n in np.__all__ if n != "row_stack"]
        from numba import cuda, types

        if sys.argv[1] == "shim":
            assert apply_numpy_shim() is True
            assert apply_numpy_shim() is False  # once is enough
        if sys.argv[1] == "callable":  # a numba_cuda_callable's handler shims first
            from polykernel.backends.numba_cuda.callable import run_on_gpu
            try:
                run_on_gpu(lambda stream: None, [], [], 0)
            except Exception:  # no GPU here: the launch itself fails
                pass
            assert apply_numpy_shim() is False

        @cuda.jit
        def inc(x, out):
            out[0] = x[0] + 1

        a = types.Array(types.float32, 1, "C")
        ptx, _ = cuda.compile_ptx(inc.py_func, (a, a), cc=(8, 0))
        assert ".entry" in ptx and "row_stack" not in np.__dict__
        print("compiled")
    """)
    # Children of the test's jax zygote: NumPy is imported there, Numba not, so
    # each child drops row_stack before it imports Numba, as a fresh process does.
    run = ["-c", script]
    for mode in ("shim", "callable"):
        ok = zygote.run([*run, mode], env=run_env)
        assert ok.returncode == 0 and "compiled" in ok.stdout, ok.stderr
    bad = zygote.run([*run, "none"], env=run_env)
    assert bad.returncode != 0 and "no attribute 'row_stack'" in bad.stderr


# -- on a GPU (make test-gpu) --------------------------------------------------------
def _on_gpu():
    return jax.default_device(jax.devices("gpu")[0])


@pytest.mark.gpu
def test_gpu_launch_matches_the_simulator_and_chains_in_one_jit():
    n = 1000
    f = pk.numba_cuda_kernel(axpy, jax.ShapeDtypeStruct((n,), F32), launch_dims=n)
    x = jnp.arange(n, dtype=F32)
    expected = f(x, x)  # CPU default device: the simulator
    with _on_gpu():
        xg = jax.device_put(x, jax.devices("gpu")[0])
        np.testing.assert_allclose(jax.jit(f)(xg, xg), expected)
        chained = jax.jit(lambda v: [v := f(v, v) for _ in range(10)][-1])(xg)
    np.testing.assert_allclose(chained, np.arange(n) * 3.0**10, rtol=1e-5)


@pytest.mark.gpu
def test_gpu_vmap_and_aliasing():
    n = 64
    f = pk.numba_cuda_kernel(axpy, jax.ShapeDtypeStruct((n,), F32), launch_dims=n,
                             vmap_method="expand_dims",
                             input_output_aliases={1: 0})  # fmt: skip
    with _on_gpu():
        xs = jnp.arange(3 * n, dtype=F32).reshape(3, n)
        got = jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, jnp.ones(n, F32))
    np.testing.assert_allclose(got, 2 * np.asarray(xs) + 1)


@pytest.mark.gpu
def test_gpu_scalar_keywords_match_the_simulator():
    f = pk.numba_cuda_kernel(scaled, jax.ShapeDtypeStruct((64,), F32), launch_dims=64)
    x = jnp.arange(64, dtype=F32)
    expected = f(x, alpha=2.5, n=3, flag=True)  # CPU default device: the simulator
    np.testing.assert_allclose(expected, 2.5 * np.arange(64) + 4)
    with _on_gpu():
        xg = jax.device_put(x, jax.devices("gpu")[0])
        got = jax.jit(lambda v: f(v, alpha=2.5, n=3, flag=True))(xg)
        other = jax.jit(lambda v: f(v, alpha=-1.0, n=0, flag=False))(xg)
    np.testing.assert_allclose(got, expected)
    np.testing.assert_allclose(other, -np.arange(64))


@pytest.mark.gpu
def test_gpu_numba_cuda_callable_launches_on_xla_stream():
    def twice(x, out, stream):
        axpy[4, 256, stream](x, x, out)

    f = pk.numba_cuda_callable(twice, jax.ShapeDtypeStruct((1000,), F32))
    with _on_gpu():
        x = jax.device_put(jnp.arange(1000, dtype=F32), jax.devices("gpu")[0])
        np.testing.assert_allclose(jax.jit(f)(x), 3 * np.arange(1000))
