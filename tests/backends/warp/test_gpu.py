"""Warp's GPU path: built ahead of time here, launched only where a GPU and Warp are.

The ``slow`` tests below are what checks this path in CI: Warp's NVRTC build for
``sm_80`` and ``sm_90``, the build kept in the cache for a new process, the launch
spec against the compiled entry's parameter list, registration with the native
launcher, and lowering for CUDA. The ``gpu`` test runs only on a machine with both
a GPU and warp-lang (the lent GPU machines get warp-lang from ``.ci/gpu-warp``).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocess_support import last_json, run_python

import polykernel as pk
from polykernel.backends.warp.gpu_build import build_cuda
from polykernel.backends.warp.gpu_target import launch_spec

wp = pytest.importorskip("warp")
N = 1000


@wp.kernel
def saxpy(x: wp.array(dtype=wp.float32), alpha: wp.float32,
          y: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):  # fmt: skip
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


def _spec(kernel, build, *, launch_dims=None):
    f = pk.warp_kernel(kernel, jax.ShapeDtypeStruct((N,), jnp.float32))
    return launch_spec(f.plan, [(N,), (N,)], f.out_specs,
                       [("alpha", np.float32(2.0))], launch_dims,
                       build.block_dim, build.launch_ndim)  # fmt: skip


def _ptx_params(ptx: bytes, entry: str) -> list[int]:
    """Byte size of each parameter of ``entry`` in Warp's PTX."""
    body = re.search(rf"\.entry {entry}\((.*?)\)", ptx.decode(), re.S).group(1)
    sizes = []
    for line in body.split(","):
        struct = re.search(r"\.b8 \w+\[(\d+)\]", line)
        scalar = re.search(r"\.param \.[a-z](\d+) ", line)
        sizes.append(int(struct.group(1)) if struct else int(scalar.group(1)) // 8)
    return sizes


@pytest.mark.slow
def test_builds_for_sm80_and_sm90_and_the_spec_matches_the_entry_parameters():
    build = build_cuda(saxpy, ["sm_80", "sm_90"])
    kinds = sorted((im.kind, im.arch) for im in build.images)
    assert kinds == [("cubin", "80"), ("cubin", "90"), ("ptx", "80"), ("ptx", "90")]
    assert build.entry == f"{saxpy.get_mangled_name()}_cuda_kernel_forward"
    spec = _spec(saxpy, build)
    for image in build.images:
        if image.kind == "ptx":
            assert _ptx_params(image.data, build.entry) == [p.size for p in spec.params]
    assert [p.size for p in spec.params] == [24, 56, 4, 56, 56]
    assert spec.grid == (-(-N // build.block_dim), 1, 1)
    assert spec.block == (build.block_dim, 1, 1)
    blob = spec.pack([0x1000, 0x2000, 0x3000])  # pointers land in each array_t
    offsets = spec.offsets()  # bounds, x, alpha, y, out
    ptrs = [
        int.from_bytes(blob[offsets[k] : offsets[k] + 8], "little") for k in (1, 3, 4)
    ]
    assert ptrs == [0x1000, 0x2000, 0x3000]


@pytest.mark.slow
def test_registers_with_the_native_launcher_and_lowers_for_cuda(monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CUDA_ARCH", "90")  # lowered here without a GPU
    from polykernel.launcher import register_gpu_kernel

    build = build_cuda(saxpy, ["sm_80", "sm_90"])
    kernel = register_gpu_kernel(build.images, build.entry, _spec(saxpy, build))
    assert kernel.kernel_id.startswith("pkgpu_")

    op = pk.XLACustomKernel("test_warp_gpu.saxpy")

    def gen(outs, **kw):
        f = pk.warp_kernel(saxpy, outs[0])
        return lambda x, y: f(x, y, alpha=kw["alpha"])

    op.def_warp_kernel(gen)
    op.def_kernel("warp", "cpu", gen)
    x = jax.ShapeDtypeStruct((N,), jnp.float32)

    def call(x, y):
        return op(x, y, outs=[x], alpha=2.0)[0]

    exported = jax.export.export(
        jax.jit(call),
        platforms=("cuda",),
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(
            "polykernel_gpu_launch")],
    )(x, x)  # fmt: skip
    text = exported.mlir_module()
    assert "polykernel_gpu_launch" in text  # CUDA: our launcher, Warp's image id
    assert re.search(r'kernel = "pkgpu_[0-9a-f]{32}"', text)
    cpu_text = jax.jit(call).lower(x, x).as_text()
    assert re.search(r"pk_warp_[0-9a-f]{24}", cpu_text)  # CPU: our handler


@pytest.mark.slow
def test_each_scalar_value_gets_its_own_launch_template(monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CUDA_ARCH", "90")  # lowered here without a GPU
    from polykernel.contract.platform_context import lowering_for

    f = pk.warp_kernel(saxpy, jax.ShapeDtypeStruct((N,), jnp.float32))
    x = jax.ShapeDtypeStruct((N,), jnp.float32)

    def kernel_id(alpha):
        with lowering_for("gpu"):  # what XLACustomKernel sets for its gpu lowering
            fn = jax.jit(lambda a, b: f(a, b, alpha=alpha))
            text = fn.trace(x, x).lower(lowering_platforms=("cuda",)).as_text()
        return re.search(r'kernel = "(pkgpu_[0-9a-f]{32})"', text).group(1)

    assert kernel_id(2.0) == kernel_id(2.0) != kernel_id(3.0)


@pytest.mark.gpu
def test_launches_on_a_gpu():
    gpu = jax.devices("gpu")[0]
    f = pk.warp_kernel(saxpy, jax.ShapeDtypeStruct((N,), jnp.float32))
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), gpu)
    y = jax.device_put(jnp.ones(N, jnp.float32), gpu)
    np.testing.assert_allclose(jax.jit(lambda a, b: f(a, b, alpha=2.0))(x, y),
                               2 * np.arange(N) + 1)  # fmt: skip


@wp.kernel
def typed_saxpy(x: wp.array[wp.float32], alpha: wp.float32,
                y: wp.array[wp.float32], out: wp.array[wp.float32]):  # fmt: skip
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


@pytest.mark.slow
def test_typed_array_annotations_build_with_the_same_launch_layout():
    build = build_cuda(typed_saxpy, ["sm_90"])
    spec = _spec(typed_saxpy, build)
    ptx = next(im for im in build.images if im.kind == "ptx")
    assert _ptx_params(ptx.data, build.entry) == [p.size for p in spec.params]
    assert [p.size for p in spec.params] == [24, 56, 4, 56, 56]


WARM_CHILD = '''
import json, sys
import warp as wp
from polykernel.backends.warp import gpu_build, types

@wp.kernel
def scale(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = 3.0 * x[i]

compiled = []
real = wp.compile_aot_module
wp.compile_aot_module = lambda *a, **k: compiled.append(1) or real(*a, **k)
build = gpu_build.build_cuda(scale, ["sm_90"])
print(json.dumps({
    "started_warp": types._initialised,
    "compiled": len(compiled),
    "entry": build.entry,
    "launch": [build.block_dim, build.launch_ndim, build.shared_mem],
    "images": sorted([im.kind, im.arch, im.data.hex()[:4096]] for im in build.images),
}))
'''


@pytest.mark.slow  # three new processes, two of them building with NVRTC
def test_a_new_process_loads_the_cuda_build_from_the_cache_without_warp(
    tmp_path, run_env
):
    # Children of the jax zygote: polykernel imported, Warp neither imported nor
    # started (the child imports it), as in a fresh process once it imported them.
    script = tmp_path / "warm_child.py"
    script.write_text(WARM_CHILD)
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "cache"))
    cold = last_json(run_python(script, env=env, timeout=300, forked=True))
    warm = last_json(run_python(script, env=env, timeout=300, forked=True))
    assert cold["started_warp"] and cold["compiled"] == 2  # cubin, then PTX
    assert not warm["started_warp"] and warm["compiled"] == 0, warm
    assert {k: warm[k] for k in ("entry", "launch", "images")} == {
        k: cold[k] for k in ("entry", "launch", "images")
    }
    # Another architecture is another build: compiled, not read.
    script.write_text(WARM_CHILD.replace('["sm_90"]', '["sm_80"]'))
    other = last_json(run_python(script, env=env, timeout=300, forked=True))
    assert other["compiled"] == 2 and other["images"] != cold["images"]
