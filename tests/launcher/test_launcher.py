"""The native GPU launcher: built here, its handlers and packing checked without a GPU.

Everything but the driver calls runs on this machine: the library builds (g++, and
nvcc in a slow test), registers for CUDA, answers XLA's metadata query with the
command-buffer trait, and its batch plan and parameter packing are compared with
the pure-Python reference (``polykernel.launcher.layout``). Launches are ``gpu`` tests.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from polykernel.ffi import abi
from polykernel.ffi.metadata import query_metadata
from polykernel.launcher import (
    GRAPH_TARGET,
    NOGRAPH_TARGET,
    BufferSpec,
    KernelImage,
    LaunchSpec,
    build as launcher_build,
    build_launcher,
    constant,
    launcher_library,
    pointer,
    register_gpu_kernel,
)
from polykernel.launcher.build import (
    launcher_key,
    launcher_source,
    launcher_sources,
)
from polykernel.launcher.kernels import kernel_id

F32 = abi.DTYPE_CODES["float32"]
AXPY_SRC = r"""
extern "C" __global__ void axpy(const float* x, float* y, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + 1.0f;
}
"""


def _spec(n=8, grid=1, align=0):
    return LaunchSpec(
        n_in=1,
        buffers=(BufferSpec("float32", (n,)), BufferSpec("float32", (n,))),
        params=(
            pointer(0, align),
            pointer(1, align),
            constant(2.0, "float32"),
            constant(n, "int64"),
        ),
        grid=(grid, 1, 1),
        block=(32, 1, 1),
    )


def _cubin(arch: str) -> bytes:
    from cuda.core import Program, ProgramOptions

    program = Program(AXPY_SRC, code_type="c++", options=ProgramOptions(arch=arch))
    return bytes(program.compile("cubin").code)


def test_handlers_are_native_and_report_the_cuda_graph_trait():
    lib = launcher_library()
    for address, traits in ((lib.launch, 1), (lib.launch_nograph, 0)):
        assert lib.contains(address)  # machine code in the launcher, not a callback
        meta = query_metadata(address)
        # the oldest supported version, whatever headers built it (see polykernel_ffi.h)
        assert meta.api_version == (abi.API_MAJOR, abi.API_MINOR)
        assert meta.traits == traits


def test_without_a_gpu_the_driver_error_is_clear():
    ok, why = launcher_library().driver_status()
    if ok:
        pytest.skip("a CUDA driver is present here")
    assert "libcuda.so.1" in why and "NVIDIA GPU and its driver" in why


def test_kernel_ids_are_content_derived_and_stable_across_processes():
    image = KernelImage("ptx", "sm_80", b".version 8.0\n")
    kid = kernel_id("axpy", _spec(), [image])
    assert kid.startswith("pkgpu_") and len(kid) == 38
    assert kernel_id("axpy", _spec(), [image]) == kid
    assert kernel_id("axpy2", _spec(), [image]) != kid
    assert kernel_id("axpy", _spec(16), [image]) != kid
    assert kernel_id("axpy", _spec(), [KernelImage("ptx", "90", image.data)]) != kid
    code = (
        "from polykernel.launcher.kernels import kernel_id, KernelImage\n"
        "import test_launcher as t\n"
        "print(kernel_id('axpy', t._spec(), [KernelImage('ptx', 'sm_80', "
        "b'.version 8.0\\n')]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONHASHSEED": "123"},
                         cwd=str(__import__("pathlib").Path(__file__).parent),
                         check=True)  # fmt: skip
    assert out.stdout.strip() == kid


def test_registration_is_idempotent_and_picks_the_target_by_trait():
    lib = launcher_library()
    image = KernelImage("ptx", "80", b"// registration test\n")
    first = register_gpu_kernel(image, "axpy", _spec(24), name="axpy24")
    count = lib.kernel_count()
    again = register_gpu_kernel(image, "axpy", _spec(24))
    assert again is first and lib.kernel_count() == count
    assert first.target == GRAPH_TARGET and first.attributes() == {
        "kernel": first.kernel_id
    }
    nograph = register_gpu_kernel(image, "axpy", _spec(24), allow_cuda_graph=False)
    assert nograph.target == NOGRAPH_TARGET and nograph.kernel_id == first.kernel_id


def test_native_packing_matches_the_python_reference():
    lib = launcher_library()
    spec = _spec(8)
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// pack\n"), "axpy", spec)
    blobs = lib.plan_launches(k.kernel_id, [F32, F32], [(8,), (8,)], [0x1000, 0x2000],
                              spec.template_size())  # fmt: skip
    assert blobs == [spec.pack([0x1000, 0x2000])]
    assert struct.unpack("<QQfiq", blobs[0]) == (0x1000, 0x2000, 2.0, 0, 8)


def test_native_batch_loop_offsets_every_slice_and_broadcasts_size_one():
    lib = launcher_library()
    spec = _spec(8)
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// batch\n"), "axpy", spec)
    blobs = lib.plan_launches(k.kernel_id, [F32, F32], [(1, 8), (3, 8)],
                              [0x1000, 0x2000], spec.template_size())  # fmt: skip
    assert blobs == [spec.pack([0x1000, 0x2000 + 32 * i]) for i in range(3)]
    nested = lib.plan_launches(k.kernel_id, [F32, F32], [(2, 1, 8), (2, 2, 8)],
                               [0x1000, 0x2000], spec.template_size())  # fmt: skip
    expected = [(0x1000 + 32 * i, 0x2000 + 64 * i + 32 * j) for i in (0, 1)
                for j in (0, 1)]  # fmt: skip
    assert nested == [spec.pack(list(p)) for p in expected]


@pytest.mark.parametrize(
    ("dtypes", "shapes", "pointers", "message"),
    [
        ([F32, 12], [(8,), (8,)], [0, 0], "output 0 has dtype float64, the kernel was "
         "compiled for float32"),
        ([F32, F32], [(8,), (9,)], [0, 0], r"output 0 has shape \(9\); the kernel was "
         r"compiled for \(8\) with 0 leading vmap axes"),
        ([F32, F32], [(2, 8), (3, 8)], [0, 0], r"input 0 has shape \(2, 8\)"),
        ([F32, F32], [(8,), (8,)], [0x1004, 0], "input 0 is at address 0x1004, but the "
         "kernel was compiled for 16-byte aligned pointers"),
    ],
)  # fmt: skip
def test_native_checks_refuse_bad_buffers_with_the_reference_message(
    dtypes, shapes, pointers, message
):
    lib = launcher_library()
    spec = _spec(8, align=16)
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// checks\n"), "axpy", spec)
    with pytest.raises(ValueError, match=message):
        lib.plan_launches(k.kernel_id, dtypes, shapes, pointers, spec.template_size())


def test_empty_grid_launches_nothing():
    lib = launcher_library()
    spec = _spec(8, grid=0)
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// empty\n"), "axpy", spec)
    assert lib.plan_launches(k.kernel_id, [F32, F32], [(8,), (8,)], [0, 0], 24) == []


def test_the_call_lowers_to_the_launcher_target_for_cuda():
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// lower\n"), "axpy", _spec(8))
    lowered = (
        jax.jit(k).trace(jnp.zeros(8, jnp.float32)).lower(lowering_platforms=("cuda",))
    )
    text = lowered.as_text()
    assert GRAPH_TARGET in text and k.kernel_id in text


def test_a_launch_spec_the_launcher_cannot_parse_is_refused():
    from polykernel.errors import KernelRegistrationError
    from polykernel.launcher import kernels as launcher_mod

    with pytest.raises(KernelRegistrationError, match="launcher refused kernel 'bad'"):
        launcher_mod._register_native(
            "pkgpu_bad", "bad", "e", _BrokenSpec(), [KernelImage("ptx", "80", b"x")]
        )


class _BrokenSpec:
    def encode(self) -> bytes:
        return struct.pack("<2q", 0x314C4B50, 99)


@pytest.mark.slow
def test_cubins_for_sm80_and_sm90_from_nvrtc_register():
    images = [KernelImage("cubin", arch, _cubin(f"sm_{arch}")) for arch in ("80", "90")]
    assert all(im.data[:4] == b"\x7fELF" for im in images)
    k = register_gpu_kernel(images, "axpy", _spec(64, grid=2), name="nvrtc_axpy")
    assert len(k.images) == 2


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_the_launcher_builds_with_nvcc():
    path, _ = build_launcher("nvcc")
    assert path.is_file() and path != launcher_library().path


def test_the_cache_key_covers_every_file_of_the_launcher():
    sources = launcher_sources()
    headers = sorted(launcher_source().with_suffix("").glob("*.h"))
    assert {"driver.h", "spec.h", "plan.h", "load.h"} <= {h.name for h in headers}
    expected = ["gpu_launcher.cc"] + [f"gpu_launcher/{h.name}" for h in headers]
    assert list(sources) == expected  # the .cc, then every header sorted by name
    context = {"flags": "-O3", "compiler": "g++ 12"}
    key = launcher_key(sources, context)
    assert launcher_key(dict(reversed(sources.items())), context) == key
    for name, data in sources.items():
        edited = {**sources, name: data + b"// edit\n"}
        assert launcher_key(edited, context) != key, name
    renamed = {n.replace("plan.h", "other.h"): d for n, d in sources.items()}
    assert launcher_key(renamed, context) != key
    assert launcher_key(sources, {**context, "flags": "-O2"}) != key


class _KeyComputed(Exception):
    pass


def _build_key(monkeypatch, compiler=None, sources=None):
    """The cache key build_launcher computes, and its flags (stops before the build)."""
    seen = {}

    def record(files, context):
        seen.update(files=files, flags=context["flags"].split("\0"))
        seen["key"] = launcher_key(files, context)
        raise _KeyComputed

    monkeypatch.setattr(launcher_build, "launcher_key", record)
    if sources is not None:
        monkeypatch.setattr(launcher_build, "launcher_sources", lambda: sources)
    with pytest.raises(_KeyComputed):
        build_launcher(compiler)
    return seen


@pytest.mark.parametrize(
    "compiler",
    [
        None,
        pytest.param(
            "nvcc",
            marks=pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc"),
        ),
    ],
)
def test_editing_a_launcher_header_changes_the_build_key(monkeypatch, compiler):
    first = _build_key(monkeypatch, compiler)
    assert f"-I{launcher_source().with_suffix('')}" in first["flags"]
    assert "gpu_launcher/plan.h" in first["files"]
    edited = {**first["files"]}
    edited["gpu_launcher/plan.h"] += b"// edit\n"
    assert _build_key(monkeypatch, compiler, edited)["key"] != first["key"]
    assert _build_key(monkeypatch, compiler, first["files"])["key"] == first["key"]


@pytest.mark.gpu
def test_gpu_launch_of_an_nvrtc_cubin_on_xla_stream():
    cc = jax.devices("gpu")[0].compute_capability.replace(".", "")
    n = 1000
    images = [KernelImage("cubin", cc, _cubin(f"sm_{cc}"))]
    k = register_gpu_kernel(images, "axpy", _spec(n, grid=(n + 31) // 32))
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), jax.devices("gpu")[0])
    (y,) = jax.jit(k)(x)
    np.testing.assert_allclose(np.asarray(y), 2 * np.arange(n) + 1)
    chained = jax.jit(lambda x: [x := k(x)[0] for _ in range(100)][-1])(x)
    assert np.isfinite(np.asarray(chained)).all()


def _frame_call(kid, buffers=None, attrs=None, n_in=1):
    from ffi_frames import call_handler

    buffers = buffers or [(F32, (8,), 0x1000), (F32, (8,), 0x2000)]
    attrs = {"kernel": kid} if attrs is None else attrs
    return call_handler(launcher_library().launch, buffers, attrs, n_in)


def test_handler_decodes_the_frame_and_stops_at_the_missing_driver():
    ok, _ = launcher_library().driver_status()
    if ok:
        pytest.skip("a CUDA driver is present here")
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// frame\n"), "axpy", _spec(8))
    message = _frame_call(k.kernel_id)
    assert "polykernel GPU launcher: cannot load the CUDA driver library" in message


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unknown", "kernel 'pkgpu_0000' is not registered in this process"),
        ("no_attribute", "no string attribute 'kernel'"),
        ("counts", "called with 2 input(s) and 1 output(s), the kernel takes 1 and 1"),
        ("shape", r"output 0 has shape (3, 7); the kernel was compiled for (8)"),
    ],
)
def test_handler_errors_reach_xla_with_a_message(case, message):
    k = register_gpu_kernel(KernelImage("ptx", "80", b"// errors\n"), "axpy", _spec(8))
    if case == "unknown":
        got = _frame_call("pkgpu_0000")
    elif case == "no_attribute":
        got = _frame_call(k.kernel_id, attrs={})
    elif case == "counts":
        bufs = [(F32, (8,), 0x1000)] * 3
        got = _frame_call(k.kernel_id, buffers=bufs, n_in=2)
    else:
        got = _frame_call(k.kernel_id, buffers=[(F32, (8,), 0), (F32, (3, 7), 0)])
    assert got is not None and message in got
