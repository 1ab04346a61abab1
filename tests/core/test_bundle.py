"""pk.export_bundle / pk.load_bundle: the file, its checks and their messages.

The kernels here are C++ (``load_cpp_inline``): the checks are the bundle's, the same
for every backend. The hermetic acceptance (every CPU backend, a bare virtualenv,
no compiler) is ``test_bundle_hermetic.py``.
"""

from __future__ import annotations

import json
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.core import bundle_file

SRC = r"""
void add_one(const pk::Tensor& x, pk::Tensor& out) {
  const float* a = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = a[i] + 1.0f;
}
"""
SPEC = jax.ShapeDtypeStruct((8,), jnp.float32)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    mod = pk.load_cpp_inline("bundle_unit_add_one", SRC, ["add_one"])
    fn = jax.jit(lambda x: mod.add_one(x, outs=SPEC))
    path = tmp_path_factory.mktemp("bundle") / "add_one.pkb"
    pk.export_bundle(fn, path, SPEC)
    return path


def _rewrite(src, dst, edit):
    """Copy bundle ``src`` to ``dst`` with ``edit(manifest, files)`` applied."""
    with zipfile.ZipFile(src) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(files.pop(bundle_file.MANIFEST))
    edit(manifest, files)
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr(bundle_file.MANIFEST, json.dumps(manifest))
        for name, data in files.items():
            zf.writestr(name, data)
    return dst


def test_round_trip_in_process(written):
    bundle = pk.load_bundle(written)
    x = jnp.arange(8, dtype=jnp.float32)
    assert bundle(x).tolist() == (np.arange(8) + 1).tolist()
    assert bundle.call(x).tolist() == bundle(x).tolist()
    assert len(bundle.kernels) == 1 and bundle.kernels[0].startswith("bundle_unit")
    manifest = bundle.manifest
    assert manifest["format"] == bundle_file.FORMAT
    assert manifest["kernels"][0]["backend"] == "cuda_raw"
    assert set(manifest["files"]) == {"program.jaxexport", *(
        k["file"] for k in manifest["kernels"])}  # fmt: skip


def test_not_a_bundle(tmp_path):
    path = tmp_path / "x.pkb"
    path.write_bytes(b"hello")
    with pytest.raises(pk.BundleFormatError, match=r"cannot read it as a bundle"):
        pk.load_bundle(path)
    with pytest.raises(pk.BundleFormatError, match=r"no such file"):
        pk.load_bundle(tmp_path / "missing.pkb")


def test_newer_format_is_named(written, tmp_path):
    def newer(manifest, files):
        manifest["format"] = bundle_file.FORMAT + 1

    path = _rewrite(written, tmp_path / "newer.pkb", newer)
    with pytest.raises(pk.BundleFormatError, match=r"bundle format 2.*reads format 1"):
        pk.load_bundle(path)


def test_a_changed_library_fails_its_checksum(written, tmp_path):
    def damage(manifest, files):
        name = manifest["kernels"][0]["file"]
        files[name] = files[name][:-1] + bytes([files[name][-1] ^ 1])

    path = _rewrite(written, tmp_path / "damaged.pkb", damage)
    with pytest.raises(pk.BundleChecksumError, match=r"kernels/.*has SHA-256"):
        pk.load_bundle(path)


def test_a_cpu_feature_the_host_lacks_is_named(written, tmp_path):
    from polykernel.ffi.artefact import ISA_FLAGS, host_isa

    lacking = sorted(ISA_FLAGS - (host_isa() or set()))
    if host_isa() is None or not lacking:
        pytest.skip("this OS does not say which instruction sets the CPU has")

    def exotic(manifest, files):
        manifest["kernels"][0]["requires"]["isa"] = lacking[:1]
        manifest["kernels"][0]["target"] += "_isa"

    path = _rewrite(written, tmp_path / "isa.pkb", exotic)
    with pytest.raises(
        pk.BundleMachineError, match=rf"built for a CPU with {lacking[0]}.*lacks"
    ):
        pk.load_bundle(path)


def test_another_machine_is_named(written, tmp_path):
    def riscv(manifest, files):
        manifest["kernels"][0]["requires"]["machine"] = "riscv64-linux"
        manifest["kernels"][0]["target"] += "_rv"

    path = _rewrite(written, tmp_path / "rv.pkb", riscv)
    with pytest.raises(pk.BundleMachineError, match=r"built for riscv64-linux"):
        pk.load_bundle(path)


def test_an_ffi_version_this_jaxlib_refuses_is_named(written, tmp_path):
    def future(manifest, files):
        manifest["kernels"][0]["api_version"] = [0, 99]
        manifest["kernels"][0]["target"] += "_ffi"

    path = _rewrite(written, tmp_path / "ffi.pkb", future)
    with pytest.raises(pk.BundleFfiVersionError, match=r"speaks XLA FFI API 0.99"):
        pk.load_bundle(path)


def test_a_generated_handler_of_another_layout_is_named(written, tmp_path):
    def layout(manifest, files):
        manifest["kernels"][0]["requires"]["ffi"] = "0" * 32
        manifest["kernels"][0]["target"] += "_layout"

    path = _rewrite(written, tmp_path / "layout.pkb", layout)
    with pytest.raises(pk.BundleFfiVersionError, match=r"generated for FFI layout"):
        pk.load_bundle(path)


def test_a_kernel_without_artefact_is_refused_when_writing(tmp_path):
    op = pk.XLACustomKernel("bundle_unit.callback_only")
    op.def_jax_raw_kernel(lambda **kw: lambda x: x + 1, platform="cpu")
    fn = jax.jit(lambda x: op(x, outs=SPEC))
    # jax_raw kernels are plain JAX: nothing to carry, the bundle holds the program
    path = pk.export_bundle(fn, tmp_path / "plain.pkb", SPEC)
    bundle = pk.load_bundle(path)
    assert bundle.kernels == ()
    assert bundle(jnp.zeros(8, jnp.float32)).tolist() == [1.0] * 8
    assert bundle.decisions and bundle.decisions[0]["backend"] == "jax_raw"


def test_bad_argument_type():
    with pytest.raises(pk.KernelTypeError, match=r"expected a jax.export.Exported"):
        pk.export_bundle(42, "x.pkb")
