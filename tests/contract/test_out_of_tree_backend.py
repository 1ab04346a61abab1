"""A backend written outside polykernel plugs in through the public protocol.

``tests/support/ctypes_backend.py`` is such a backend (C functions through ctypes). Once
registered — with :func:`polykernel.register_backend`, or as an installed package's
``polykernel.backends`` entry point — a primitive registers its kernels with
``def_kernel`` like any built-in backend's, ``check_kernel`` runs it on every
transformation, ``polykernel info`` lists it, and its scalar keywords, ``outs`` and
options follow the same rules as every built-in backend's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import ctypes_backend as cb
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocess_support import SUPPORT

import polykernel as pk

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
SPEC = jax.ShapeDtypeStruct((16,), jnp.float32)
SOURCE = """
#include <stdint.h>
void scale(const float* x, float* out, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i];
}
"""


@pytest.fixture(scope="module")
def scale_fn():
    pk.register_backend(cb.BACKEND, replace=True)
    return cb.compile_c(SOURCE, "scale")


@pytest.fixture(scope="module")
def op(scale_fn):
    op = pk.XLACustomKernel("test_out_of_tree.scale")
    op.def_kernel(
        cb.NAME,
        "cpu",
        lambda outs, alpha, **kw: lambda x: cb.ctypes_kernel(
            scale_fn, outs[0], {"alpha": "float32"}
        )(x, alpha=alpha),
    )
    op.def_jax_raw_kernel(lambda outs, alpha, **kw: lambda x: alpha * x)
    op.def_jvp_rule2(lambda t, x, **kw: op(t, outs=kw["outs"], alpha=kw["alpha"]))
    op.def_transpose_rule(
        lambda ct, x, *, outs, alpha, **kw: [op(ct[0], outs=outs, alpha=alpha)[0]]
    )
    return op


def test_the_plugin_is_in_the_backend_table(scale_fn):
    assert pk.backends.lookup(cb.NAME) is cb.BACKEND
    assert cb.NAME in pk.backends.backend_names()
    from polykernel.cli.info import gather_info

    rows = [r for r in gather_info()["backends"] if r["backend"] == cb.NAME]
    assert [(r["platform"], r["usable"]) for r in rows] == [("cpu", True)]


def test_check_kernel_runs_the_out_of_tree_backend_on_every_transformation(op):
    x = jnp.linspace(-1.0, 1.0, 16, dtype=jnp.float32)
    report = pk.testing.check_kernel(
        op, x, outs=[SPEC], alpha=2.5, backends=[cb.NAME], reference="jax_raw"
    )
    assert report.ok, str(report)
    ran = {(r.check, r.backend) for r in report.results if r.status == "pass"}
    for check in ("backend_vs_reference", "jit_vs_eager", "vmap_vs_loop", "jvp_vs_fd"):
        assert (check, cb.NAME) in ran, str(report)


def test_it_is_the_default_or_a_per_call_choice_like_any_backend(op):
    x = jnp.arange(16, dtype=jnp.float32)
    assert op.get_default("cpu") == cb.NAME  # registered first
    out = op(x, outs=[SPEC], alpha=3.0)[0]
    np.testing.assert_allclose(out, 3 * x)
    np.testing.assert_allclose(op(x, outs=[SPEC], alpha=3.0, backend="jax_raw")[0],
                               out)  # fmt: skip


def test_the_core_contract_holds_for_the_plugin(scale_fn):
    kernel = cb.ctypes_kernel(scale_fn, SPEC, {"alpha": "float32"})
    x = jnp.ones(16, jnp.float32)
    assert kernel.vmap_method == "expand_dims"  # the one default
    np.testing.assert_allclose(jax.vmap(lambda r: kernel(r, alpha=2.0))(
        jnp.ones((3, 16), jnp.float32)), 2 * np.ones((3, 16)))  # fmt: skip
    with pytest.raises(pk.KernelCallError, match=r"attribute 'alpha'=None cannot be "
                       r"converted to float32: expected a real number"):  # fmt: skip
        kernel(x, alpha=None)
    with pytest.raises(pk.AttributeValueError, match=r"'alpha'=1e\+300 .* out of "):
        kernel(x, alpha=1e300)
    with pytest.raises(pk.KernelCallError, match=r"ctypes_kernel 'scale': unknown "
                       r"keyword argument 'beta' \(parameters: alpha: float32\)"):
        kernel(x, alpha=1.0, beta=2.0)
    with pytest.raises(pk.KernelCallError, match="missing keyword argument 'alpha'"):
        kernel(x)
    with pytest.raises(pk.UnsupportedDtypeError, match=r"outs\[0\] has dtype int32, "
                       r"which the ctypes_c backend cannot take; it takes float32"):
        cb.ctypes_kernel(scale_fn, jax.ShapeDtypeStruct((16,), jnp.int32))
    with pytest.raises(pk.KernelRegistrationError, match="non-empty list/tuple"):
        cb.ctypes_kernel(scale_fn, [])
    with pytest.raises(pk.KernelRegistrationError, match="vmap_method must be one of"):
        cb.ctypes_kernel(scale_fn, SPEC, vmap_method="magic")


def test_register_backend_refuses_taken_names_and_non_backends():
    with pytest.raises(pk.KernelRegistrationError, match="'numba' is taken"):
        pk.register_backend(pk.Backend(name="numba"))
    with pytest.raises(pk.KernelTypeError, match=r"expected a polykernel\.Backend"):
        pk.register_backend("ctypes_c")
    first = pk.register_backend(pk.Backend(name="test_plugin_once"))
    with pytest.raises(pk.KernelRegistrationError, match="pass replace=True"):
        pk.register_backend(pk.Backend(name="test_plugin_once"))
    assert pk.register_backend(first, replace=True) is first


ENTRY_POINT_PROBE = """
import json, sys
import polykernel as pk
from polykernel.cli.info import gather_info
backend = pk.backends.lookup("ctypes_c")
info = gather_info()
print(json.dumps({
    "found": backend is not None and type(backend).__name__,
    "rows": [r["backend"] for r in info["backends"]],
}))
"""


def test_an_installed_entry_point_adds_the_backend_without_any_call(tmp_path, run_env):
    # A real distribution on the path: metadata plus the module, as pip leaves them.
    site = tmp_path / "site"
    info = site / "pk_ctypes_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pk-ctypes-plugin\n"
                                   "Version: 1.0\n")  # fmt: skip
    (info / "entry_points.txt").write_text(textwrap.dedent("""
        [polykernel.backends]
        ctypes_c = ctypes_backend:BACKEND
    """))
    shutil.copy(SUPPORT / "ctypes_backend.py", site / "ctypes_backend.py")
    env = {**run_env, "PYTHONPATH": f"{site}:{run_env.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-c", ENTRY_POINT_PROBE], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["found"] == "CtypesBackend"
    assert "ctypes_c" in report["rows"]
