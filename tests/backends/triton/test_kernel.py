"""``triton_kernel`` on the CPU (Triton's interpreter) and through a primitive.

Everything here runs on this machine: Triton's interpreter executes the kernels on
NumPy arrays (no PyTorch, no ``TRITON_INTERPRET``), and the same operation runs
through an ``XLACustomKernel`` with a ``jax_raw`` reference under eager, ``jit``,
``vmap``, ``jvp`` and ``grad``. Problems are tiny: the interpreter is slow.
"""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from triton_kernels import axpy, axpy_kernel  # noqa: E402

import polykernel as pk  # noqa: E402
from polykernel.contract.platform_context import lowering_for  # noqa: E402
from polykernel.errors import (  # noqa: E402
    KernelCompilationError,
    KernelRegistrationError,
    KernelTypeError,
    UnsupportedOperationError,
)

N = 10


@triton.jit
def sum_and_max(x_ptr, s_ptr, m_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    # One program per row (a 2-D grid: axis 1 is always 0 here).
    row = tl.program_id(0) + tl.program_id(1)
    x = tl.load(x_ptr + row * COLS + tl.arange(0, COLS))
    tl.store(s_ptr + row, tl.sum(x, axis=0))
    tl.store(m_ptr + row, tl.max(x, axis=0))


def _axpy(n=N, **kw):
    return axpy_kernel(n, 4, **kw)


def _xy(n=N):
    return jnp.arange(n, dtype=jnp.float32), jnp.linspace(0, 1, n, dtype=jnp.float32)


def test_import_polykernel_does_not_import_triton():
    import subprocess
    import sys

    code = "import sys, polykernel; print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True, env=dict(os.environ))  # fmt: skip
    assert out.stdout.strip() == "False"


def test_eager_and_jit_run_in_the_interpreter_and_match_numpy():
    f = _axpy()
    x, y = _xy()
    want = 2.0 * np.asarray(x) + np.asarray(y)
    np.testing.assert_allclose(f(x, y, n=N, alpha=2.0), want, rtol=1e-6)
    jitted = jax.jit(lambda x, y: f(x, y, n=N, alpha=2.0))
    np.testing.assert_allclose(jitted(x, y), want, rtol=1e-6)
    assert os.environ.get("TRITON_INTERPRET") is None
    assert triton.knobs.runtime.interpret is False  # nothing switched process-wide


def test_vmap_runs_one_launch_per_element_and_broadcasts_unbatched_inputs():
    f = _axpy()
    x, y = _xy()
    xs = jnp.stack([x, 2 * x, 3 * x])
    got = jax.vmap(lambda x: f(x, y, n=N, alpha=1.0))(xs)
    np.testing.assert_allclose(got, np.asarray(xs) + np.asarray(y), rtol=1e-6)
    both = jax.vmap(lambda x, y: f(x, y, n=N, alpha=1.0))(xs, xs)
    np.testing.assert_allclose(both, 2 * np.asarray(xs), rtol=1e-6)


def test_two_outputs_a_2d_grid_and_a_constexpr_given_at_call_time():
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    outs = [jax.ShapeDtypeStruct((3,), jnp.float32)] * 2
    f = pk.triton_kernel(sum_and_max, outs, grid=(3, 1), num_warps=1, COLS=4)
    s, m = f(x, ROWS=3)
    np.testing.assert_allclose(s, np.asarray(x).sum(1))
    np.testing.assert_allclose(m, np.asarray(x).max(1))


def test_an_empty_grid_launches_nothing_and_gives_zeros():
    f = pk.triton_kernel(axpy, jax.ShapeDtypeStruct((N,), jnp.float32), grid=0,
                         BLOCK=4)  # fmt: skip
    x, y = _xy()
    assert not np.asarray(f(x, y, n=N, alpha=1.0)).any()


def _primitive(name):
    op = pk.XLACustomKernel(name)
    op.def_jax_raw_kernel(
        lambda outs, alpha, **kw: lambda x, y: [alpha * x + y], platform="cpu"
    )

    def triton_generator(outs, alpha, **kw):
        n = outs[0].shape[0]
        f = pk.triton_kernel(axpy, outs[0], grid=(triton.cdiv(n, 4),), BLOCK=4)
        return lambda x, y: [f(x, y, n=n, alpha=alpha)]

    op.def_kernel("triton", "cpu", triton_generator)
    op.def_triton_kernel(triton_generator)  # the same generator serves the GPU
    op.def_jvp_rule2(lambda t, x, y, *, alpha, **kw: [alpha * t],
                     lambda t, x, y, **kw: [t])  # fmt: skip
    return op


def test_primitive_triton_cpu_matches_jax_raw_in_every_transform():
    op = _primitive("test.triton.axpy_cross")
    x, y = _xy()
    spec = jax.ShapeDtypeStruct((N,), jnp.float32)

    def run(backend):
        def f(x, y):
            return op(x, y, outs=[spec], alpha=1.5, backend=backend)[0]

        xs = jnp.stack([x, x + 1])
        return {
            "eager": f(x, y),
            "jit": jax.jit(f)(x, y),
            "vmap": jax.vmap(f, in_axes=(0, None))(xs, y),
            "jvp": jax.jvp(f, (x, y), (jnp.ones_like(x), y))[1],
            "grad": jax.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(x, y),
        }

    want, got = run("jax_raw"), run("triton")
    for case in want:
        np.testing.assert_allclose(
            np.asarray(got[case]), np.asarray(want[case]), rtol=1e-6, err_msg=case
        )
    assert op.available_backends("gpu") == ["triton"]


def test_check_kernel_passes_for_the_triton_cpu_backend():
    op = _primitive("test.triton.axpy_check")
    report = pk.testing.check_kernel(
        op, *_xy(), outs=[jax.ShapeDtypeStruct((N,), jnp.float32)], alpha=1.5,
        backends=["triton"], reference="jax_raw",
    )  # fmt: skip
    text = str(report)
    assert ", 0 failed," in text
    for check in ("backend_vs_reference", "vmap_vs_loop", "jvp_vs_fd", "grad_vs_jvp"):
        assert re.search(rf"^{check}\s+triton\s+cpu.*\spass\s", text, re.M), check


def test_the_platform_context_picks_the_path():
    f = _axpy()
    x, y = _xy()
    with lowering_for("tpu"), pytest.raises(UnsupportedOperationError,
                                             match=r"no tpu path; this kernel runs on "
                                             r"\['cpu', 'gpu'\]"):  # fmt: skip
        f(x, y, n=N, alpha=1.0)
    text = jax.jit(lambda x, y: f(x, y, n=N, alpha=1.0)).lower(x, y).as_text()
    assert "callback" in text  # on CPU: the interpreter behind a host callback


def test_the_lowering_rule_tells_the_generator_which_platform_it_lowers_for():
    from polykernel.contract.platform_context import current_platform

    seen = []
    op = pk.XLACustomKernel("test.triton.platform_seen")

    def generator(outs, **kw):
        seen.append(current_platform())
        return lambda x: [x]

    op.def_kernel("jax_raw", "cpu", generator)
    op.def_kernel("jax_raw", "gpu", generator)
    x = jnp.ones(3)
    f = jax.jit(lambda x: op(x, outs=[jax.ShapeDtypeStruct((3,), x.dtype)])[0])
    f.trace(x).lower(lowering_platforms=("cuda",))
    f.trace(x).lower(lowering_platforms=("cpu",))
    assert seen == ["gpu", "cpu"]


def test_rejects_a_function_that_is_not_triton_jit():
    with pytest.raises(KernelTypeError, match=r"expected a @triton\.jit function, got "
                       r"function 'plain'") as info:  # fmt: skip

        def plain(x):
            return x

        pk.triton_kernel(plain, jax.ShapeDtypeStruct((1,), jnp.float32), grid=1)
    assert isinstance(info.value, TypeError) and isinstance(info.value, AssertionError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grid": (1, 2, 3, 4)}, r"grid must be an int or a tuple of 1 to 3 "
         r"ints, or a callable meta -> such a tuple, got \(1, 2, 3, 4\)"),
        ({"grid": -1}, r"every entry of grid must be in \[0, 2147483647\], got -1"),
        ({"grid": "4"}, r"grid must be an int or a tuple .* got '4' \(str\)"),
        ({"grid": 1, "num_warps": 3}, "num_warps must be a power of two .* got 3"),
        ({"grid": 1, "num_stages": 0}, r"num_stages must be an int in \[1, 16\], "
         r"got 0"),
        ({"grid": 1, "outs": []}, "outs must be a jax.ShapeDtypeStruct or a "
         "non-empty list/tuple"),
    ],
)  # fmt: skip
def test_invalid_arguments_are_value_errors_that_say_what_to_pass(kwargs, message):
    outs = kwargs.pop("outs", jax.ShapeDtypeStruct((N,), jnp.float32))
    with pytest.raises(KernelRegistrationError, match=message) as info:
        pk.triton_kernel(axpy, outs, **kwargs)
    assert isinstance(info.value, ValueError)


def test_a_grid_callable_returning_nonsense_and_a_missing_scalar():
    f = pk.triton_kernel(axpy, jax.ShapeDtypeStruct((N,), jnp.float32),
                         grid=lambda meta: "x", BLOCK=4)  # fmt: skip
    x, y = _xy()
    with pytest.raises(KernelRegistrationError, match="got 'x'"):
        f(x, y, n=N, alpha=1.0)
    with pytest.raises(pk.KernelCallError, match=r"triton_kernel 'axpy': missing "
                       r"keyword argument 'alpha' \(x_ptr, y_ptr, out_ptr take the "
                       r"call's 3 arrays; parameters: n: inferred, alpha: inferred, "
                       r"BLOCK: static \(optional\)\)"):  # fmt: skip
        _axpy()(x, y, n=N)


def test_a_failing_kernel_names_the_backend_to_switch_to():
    op = pk.XLACustomKernel("test.triton.axpy_error")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x, y: [x + y], platform="cpu")
    op.def_kernel("triton", "cpu", lambda outs, **kw: lambda x, y: [_axpy()(x, y)])
    with pytest.raises(KernelCompilationError, match=r"'triton' kernel for platform "
                       r"'cpu' failed.*missing keyword arguments 'n', 'alpha'"
                       r".*set_default"):  # fmt: skip
        op(*_xy(), outs=[jax.ShapeDtypeStruct((N,), jnp.float32)], backend="triton")


def test_without_triton_the_import_error_names_the_extra(monkeypatch):
    from polykernel.backends.triton import import_triton

    monkeypatch.setitem(__import__("sys").modules, "triton", None)
    with pytest.raises(ImportError, match=r"pip install 'polykernel\[triton\]'"):
        import_triton()


def test_info_reports_the_interpreter_and_the_cubin_compile_check(monkeypatch):
    from polykernel.cli import info

    rows = {(r["backend"], r["platform"]): r for r in info.gather_info()["backends"]}
    cpu, gpu = rows[("triton", "cpu")], rows[("triton", "gpu")]
    assert cpu["usable"] and f"triton {triton.__version__}" in cpu["detail"]
    assert "interpreter" in cpu["detail"]
    assert "cubins compile here (bundled ptxas)" in gpu["detail"]
    missing = 'not installed (pip install "polykernel[triton]")'
    backend = pk.backends.lookup("triton")
    monkeypatch.setattr(backend, "modules", ("no_such_triton_module",))
    assert backend.info_rows(gpu=True) == [
        ("triton", "cpu", False, missing),
        ("triton", "gpu", False, missing),
    ]
