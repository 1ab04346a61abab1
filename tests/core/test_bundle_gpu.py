"""GPU kernels in a bundle (issue 36): a C++/CUDA module's library with its cubins
and PTX, and Triton kernels with the native launcher; each checked against the GPUs
JAX sees before anything is registered.

Written here without a GPU (lowered for CUDA with ``POLYKERNEL_CUDA_ARCH``) and
loaded in a bare virtualenv with no compiler; run for real on a GPU (``gpu``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bundle_support import bare_venv
from subprocess_support import REPO, last_json, run_python

import polykernel as pk
from polykernel.core import bundle_gpu
from polykernel.ffi.artefact import gpu_fits

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "bundle_support.py"


@pytest.mark.parametrize(
    ("device", "cubins", "ptx", "fits"),
    [
        ("80", ["80"], [], True),  # its own architecture
        ("86", ["80"], [], True),  # the same family, a later version
        ("80", ["86"], [], False),  # an earlier version of the family
        ("90", ["80"], [], False),  # another family: no cubin runs
        ("90", ["80"], ["80"], True),  # ... but the driver compiles the PTX
        ("80", [], ["90"], False),  # PTX of a newer GPU
        ("90", ["90a"], [], True),  # an 'a' variant on its own GPU
        ("100", ["90a"], ["90a"], False),  # ... and nowhere else
        ("120", [], ["80"], True),
    ],
)
def test_which_gpus_cuda_code_runs_on(device, cubins, ptx, fits):
    assert gpu_fits(device, cubins, ptx) is fits


def _kernel(gpu, ptx, label="mod.twice"):
    requires = {"machine": "x86_64-linux", "gpu": gpu, "ptx": ptx}
    return {"target": "t", "label": label, "backend": "cuda_raw", "requires": requires}


def test_a_gpu_no_kernel_image_fits_is_a_named_error():
    kernels = [_kernel(["80"], ["80"]), _kernel(["90"], [], "mod.newer")]
    launcher = {"kernels": [{"name": "axpy", "images": [["cubin", "90", "f"]]}]}
    bundle_gpu.check_gpus("here", kernels, launcher, ())  # no GPU: nothing to check
    bundle_gpu.check_gpus("here", kernels, launcher, ("90",))
    with pytest.raises(pk.BundleGpuArchError) as err:
        bundle_gpu.check_gpus("here", kernels, launcher, ("86",))
    assert str(err.value).startswith(
        "here: GPU kernel 'mod.newer' holds code for sm_90, none of which runs on "
        "this sm_86 GPU (a cubin runs on its own architecture family from its "
        "version up, PTX on any GPU from its version up). Write the bundle with "
        "sm_86 among the architectures"
    )
    with pytest.raises(pk.BundleGpuArchError, match="GPU kernel 'axpy' holds code "
                       "for sm_90, none of which runs on this sm_80 GPU"):  # fmt: skip
        bundle_gpu.check_gpus("here", kernels[:1], launcher, ("80",))
    assert isinstance(err.value, pk.BundleError)


def test_the_launcher_backend_name_is_the_launchers():
    from polykernel.launcher.kernels import register_launcher_targets

    register_launcher_targets()
    from polykernel.ffi import targets

    record = targets.lookup("polykernel_gpu_launch", "CUDA")
    assert record is not None and record.backend == bundle_gpu.LAUNCHER_BACKEND


needs_gpu_writers = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None or shutil.which("nvcc") is None,
    reason="writing the GPU bundle needs Triton and nvcc",
)


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-bundle")
    env = dict(os.environ, POLYKERNEL_CACHE_DIR=str(root / "writer-cache"),
               PYTHONPATH=str(REPO / "src"))  # fmt: skip
    env.setdefault("POLYKERNEL_CUDA_ARCH", "90")  # no GPU here: name one
    run_python(SCRIPT, "write-gpu", root / "gpu.pkb", env=env, timeout=600)
    return root / "gpu.pkb"


@pytest.mark.slow
@needs_gpu_writers
def test_a_gpu_bundle_loads_with_no_compiler_and_writes_nothing(gpu_bundle, tmp_path):
    python = bare_venv(tmp_path / "venv")
    empty = tmp_path / "no-compilers"
    empty.mkdir()
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": str(empty),
           "JAX_PLATFORMS": "cpu", "POLYKERNEL_CACHE_DIR": str(tmp_path / "cache"),
           "POLYKERNEL_CONFIG_DIR": str(tmp_path / "config")}  # fmt: skip
    command = [str(python), str(SCRIPT), "load-gpu", str(gpu_bundle)]
    done = subprocess.run(command, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = last_json(done.stdout)
    assert len(got["kernels"]) == 1 and got["kernels"][0].startswith("bundle_gpu")
    assert len(got["gpu_kernels"]) == 1 and got["gpu_kernels"][0].startswith("pkgpu_")
    assert got["compilers"] == [], got
    assert not (tmp_path / "cache").exists()  # nothing written, nothing compiled


@pytest.mark.slow
@needs_gpu_writers
def test_a_gpu_the_bundle_has_no_image_for_is_refused_at_load(gpu_bundle, monkeypatch):
    import zipfile

    with zipfile.ZipFile(gpu_bundle) as z:
        names = z.namelist()
    assert any(n.endswith("cubin-90.img") for n in names)  # Triton's, for sm_90
    assert "libs/polykernel_gpu_launcher.so" in names
    # The CUDA module holds sm_80 and compute_80: 8.x and later run it; Triton's
    # sm_90 cubin and PTX do not run on an 8.6 GPU.
    monkeypatch.setattr(bundle_gpu, "cuda_device_arches", lambda: ("86",))
    with pytest.raises(pk.BundleGpuArchError, match="none of which runs on this "
                       "sm_86 GPU"):  # fmt: skip
        pk.load_bundle(gpu_bundle)


@pytest.mark.gpu
@pytest.mark.slow
@needs_gpu_writers
def test_a_gpu_bundle_runs_on_the_gpu(tmp_path):
    env = dict(os.environ, POLYKERNEL_CACHE_DIR=str(tmp_path / "writer-cache"),
               PYTHONPATH=str(REPO / "src"))  # fmt: skip
    env.pop("POLYKERNEL_CUDA_ARCH", None)  # built for this GPU
    run_python(SCRIPT, "write-gpu", tmp_path / "gpu.pkb", env=env, timeout=600)
    env["POLYKERNEL_CACHE_DIR"] = str(tmp_path / "reader-cache")  # another cache
    out = run_python(SCRIPT, "load-gpu", tmp_path / "gpu.pkb", env=env, timeout=600)
    got = last_json(out)
    assert got["ran"] and got["max_error"] == 0.0, got


def test_without_a_gpu_platform_no_gpu_is_checked(no_gpu):
    from polykernel.settings.cuda_arch import jax_cuda_arches

    assert jax_cuda_arches() == () == bundle_gpu.cuda_device_arches()
