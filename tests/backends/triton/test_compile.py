"""Triton's GPU path without a GPU: cubins for sm_90, launch parameters, native handler.

``triton.compile`` needs no device, so the cubin, its PTX and the launch spec the
native launcher gets are all checked here (``slow``: each compile takes about a
second). The GPU launch itself is a ``gpu`` test (``make test-gpu``).
"""

from __future__ import annotations

import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from triton_kernels import axpy, axpy_kernel  # noqa: E402

import polykernel as pk  # noqa: E402
from polykernel.backends.triton.compile import compile_triton  # noqa: E402
from polykernel.ffi.metadata import query_metadata  # noqa: E402
from polykernel.launcher import GRAPH_TARGET, launcher_library  # noqa: E402

N = 1000
_PTX_SIZES = {"u64": 8, "b64": 8, "s64": 8, "f64": 8, "u32": 4, "b32": 4, "s32": 4,
              "f32": 4, "u16": 2, "b16": 2, "s16": 2, "f16": 2, "u8": 1, "b8": 1,
              "s8": 1}  # fmt: skip


@triton.jit
def mixed(x_ptr, out_ptr, flag, big, half, wide, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float64)
    scale = wide + half.to(tl.float64) + big.to(tl.float64)
    y = tl.where(flag, x * scale, x)
    tl.store(out_ptr + offs, y.to(tl.float32), mask=mask)


def _axpy():
    return axpy_kernel(N, 256)


def _ptx_param_sizes(ptx: str, entry: str) -> list[int]:
    head = re.search(rf"\.entry {entry}\((.*?)\)", ptx, re.S).group(1)
    sizes = []
    for param in head.split(","):
        if m := re.search(r"\.b8 \w+\[(\d+)\]", param):  # .param .align 2 .b8 p[2]
            sizes.append(int(m.group(1)))
        else:
            sizes.append(_PTX_SIZES[re.search(r"\.param \.(\w+)", param).group(1)])
    return sizes


@pytest.mark.slow
def test_triton_produces_a_cubin_for_sm90_whose_params_match_the_launch_spec():
    f = _axpy()
    sig = f.signature(["float32", "float32"], {"n": N, "alpha": 2.0})
    k = f.gpu_kernel([((N,), "float32")] * 2, sig, f.launch_grid(sig), arch="90")
    cubin = next(im for im in k.images if im.kind == "cubin")
    assert cubin.arch == "90" and cubin.data[:4] == b"\x7fELF"
    compiled = compile_triton(axpy, sig, "90", 4, 3)
    assert compiled.entry == "axpy" and compiled.global_scratch_size == 0
    assert [p.size for p in k.spec.params] == _ptx_param_sizes(compiled.ptx, "axpy")
    assert len(k.spec.params) == 7  # 3 pointers, n, alpha, global + profile scratch
    assert k.spec.grid == (4, 1, 1) and k.spec.block == (128, 1, 1)
    blob = k.spec.pack([0x1000, 0x2000, 0x3000])
    assert np.frombuffer(blob[24:28], np.int32)[0] == N
    assert np.frombuffer(blob[28:32], np.float32)[0] == 2.0
    assert blob[32:48] == bytes(16)  # both scratch pointers null


@pytest.mark.slow
def test_scalar_widths_match_the_compiled_entry():
    f = pk.triton_kernel(mixed, jax.ShapeDtypeStruct((8,), jnp.float32), grid=1,
                         num_warps=1, BLOCK=8)  # fmt: skip
    scalars = {"flag": True, "big": 2**40, "half": np.float16(0.5), "wide": 1.5,
               "n": 8}  # fmt: skip
    sig = f.signature(["float32"], scalars)
    assert [t for _, t, _ in sig.scalars] == ["i1", "i64", "fp16", "fp32", "i32"]
    k = f.gpu_kernel([((8,), "float32")], sig, (1, 1, 1), arch="90")
    compiled = compile_triton(mixed, sig, "90", 1, 3)
    assert [p.size for p in k.spec.params] == _ptx_param_sizes(compiled.ptx, "mixed")


@pytest.mark.slow
def test_the_gpu_handler_is_native_no_python_callback_is_registered():
    f = _axpy()
    x = jnp.ones(N, jnp.float32)
    pk.config.set_compute_capability("9.0")
    try:
        fn = jax.jit(lambda x, y: f(x, y, n=N, alpha=2.0))
        from polykernel.contract.platform_context import lowering_for

        with lowering_for("gpu"):
            text = fn.trace(x, x).lower(lowering_platforms=("cuda",)).as_text()
    finally:
        pk.config.set_compute_capability(None)
    assert GRAPH_TARGET in text and "callback" not in text
    kernel_id = re.search(r"pkgpu_[0-9a-f]{32}", text).group(0)
    assert kernel_id in pk.launcher.registered_gpu_kernels()
    lib = launcher_library()
    assert lib.contains(lib.launch)  # machine code in the launcher library
    assert query_metadata(lib.launch).traits == 1  # command-buffer (CUDA graph) ok


@pytest.mark.slow
def test_vmap_on_the_gpu_path_is_one_call_the_launcher_loops_over():
    from polykernel.contract.platform_context import lowering_for
    from polykernel.ffi import abi

    f = _axpy()
    xs = jnp.ones((3, N), jnp.float32)
    y = jnp.ones(N, jnp.float32)
    pk.config.set_compute_capability("9.0")
    try:
        fn = jax.jit(jax.vmap(lambda x: f(x, y, n=N, alpha=1.0)))
        with lowering_for("gpu"):
            text = fn.trace(xs).lower(lowering_platforms=("cuda",)).as_text()
    finally:
        pk.config.set_compute_capability(None)
    assert text.count(GRAPH_TARGET) == 1 and "tensor<3x1000xf32>" in text
    kernel = pk.launcher.registered_gpu_kernels()[re.search(r"pkgpu_\w{32}", text)[0]]
    f32 = abi.DTYPE_CODES["float32"]
    x0, y0, o0 = 0x10000, 0x20000, 0x30000
    blobs = launcher_library().plan_launches(
        kernel.kernel_id, [f32] * 3, [(3, N), (N,), (3, N)], [x0, y0, o0],
        kernel.spec.template_size(),
    )  # fmt: skip
    row = 4 * N
    assert blobs == [kernel.spec.pack([x0 + row * i, y0, o0 + row * i])
                     for i in range(3)]  # fmt: skip


@pytest.mark.slow
def test_compiling_after_an_interpreted_run_is_unaffected():
    f = _axpy()
    x = jnp.ones(N, jnp.float32)
    np.testing.assert_allclose(f(x, x, n=N, alpha=1.0), 2 * np.ones(N))  # interpreter
    sig = f.signature(["float32", "float32"], {"n": N, "alpha": 3.0})
    compiled = compile_triton(axpy, sig, "80", 2, 2)
    assert compiled.images[0].data[:4] == b"\x7fELF" and compiled.num_warps == 2


def test_target_arch_follows_the_pin_then_the_environment(monkeypatch):
    from polykernel.backends.triton import target_arch
    from polykernel.contract.platform_context import gpu_visible
    from polykernel.errors import GpuArchDetectionError

    monkeypatch.setenv("POLYKERNEL_CUDA_ARCH", "sm_80")
    pk.config.set_compute_capability("8.6")
    try:
        assert target_arch() == "86"
    finally:
        pk.config.set_compute_capability(None)
    assert target_arch() == "80"
    monkeypatch.delenv("POLYKERNEL_CUDA_ARCH")
    if shutil.which("nvidia-smi") is None and not gpu_visible():
        with pytest.raises(GpuArchDetectionError, match="no CUDA GPU is visible"):
            target_arch()


@pytest.mark.gpu
def test_gpu_launch_matches_numpy_and_chains_under_jit():
    f = _axpy()
    gpu = jax.devices("gpu")[0]
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), gpu)
    y = jax.device_put(jnp.ones(N, jnp.float32), gpu)
    got = jax.jit(lambda x, y: f(x, y, n=N, alpha=2.0))(x, y)
    np.testing.assert_allclose(np.asarray(got), 2 * np.arange(N) + 1)
    chained = jax.jit(lambda x: [x := f(x, y, n=N, alpha=1.0) for _ in range(100)][-1])
    np.testing.assert_allclose(np.asarray(chained(x)), np.arange(N) + 100)
    batched = jax.vmap(lambda x: f(x, y, n=N, alpha=1.0))(jnp.stack([x, x]))
    np.testing.assert_allclose(np.asarray(batched), np.stack([np.arange(N) + 1] * 2))
