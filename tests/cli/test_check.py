"""``polykernel check``: tables, exit codes 0 / 1 / 2, benchmark data as inputs."""

from __future__ import annotations

import textwrap

import pytest

from polykernel.cli import main

MODULE = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    import polykernel as pk
    from polykernel.benchmark import BenchmarkConfig

    def make(name, offset):
        op = pk.XLACustomKernel(name)
        op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
        op.def_kernel("shifted", "cpu", lambda outs, **kw: lambda x: 2 * x + offset)
        op.def_tags("{tag}")

        def call(x, scale=1.0):
            x = jnp.asarray(x, jnp.float32) * scale
            return op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))

        op.def_call(call)
        op.def_benchmark_data(lambda *, platform: [
            BenchmarkConfig("big", (np.ones(64, np.float32),)),
            BenchmarkConfig("small", (np.arange(4.0),), {{"scale": 2.0}}),
        ])
        return op

    good = make("{prefix}.good", 0.0)
    bad = make("{prefix}.bad", 1.0)
    no_data = pk.XLACustomKernel("{prefix}.no_data")
    no_data.def_jax_raw_kernel(lambda outs, **kw: lambda x: x)
    """
)


@pytest.fixture
def module(tmp_path, request):
    prefix = f"clicheck_{request.node.name.replace('[', '_').replace(']', '')}"
    path = tmp_path / f"{prefix}.py"
    path.write_text(MODULE.format(prefix=prefix, tag=prefix))
    return str(path), prefix


def run(capsys, *argv):
    code = main(["check", "--no-catalog", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def run_named(capsys, module, name: str, *options: str):
    """``polykernel check`` of the test module's primitive ``name``."""
    path, prefix = module
    return run(capsys, f"{prefix}.{name}", "-m", path, *options)


REFERENCE_ONLY = ("--checks", "backend_vs_reference")


def test_passing_primitive_exits_zero_and_prints_its_table(capsys, module, no_gpu):
    prefix = module[1]
    code, out, err = run_named(capsys, module, "good", "--checks", "jit_vs_eager")
    assert code == 0, err
    # The smallest case is checked, through the call function (scale=2.0 applied).
    assert out.startswith(f"== {prefix}.good [small]: 2 passed, 0 failed, 0 skipped")
    rows = [line.split()[:4] for line in out.splitlines()[2:4]]
    assert rows == [["jit_vs_eager", b, "cpu", "pass"] for b in ("jax_raw", "shifted")]
    assert out.rstrip().endswith("1 primitive: 2 passed, 0 failed, 0 skipped")


def test_failing_backend_exits_one(capsys, module, no_gpu):
    path, prefix = module
    code, out, _ = run(capsys, "--tags", prefix, "-m", path, *REFERENCE_ONLY)
    assert code == 1
    assert f"== {prefix}.bad [small]: 0 passed, 1 failed, 1 skipped" in out
    assert "FAIL" in out and "output 0: 4 of 4 elements differ" in out
    assert "skipping" not in out


def test_all_cases_and_failures_only(capsys, module):
    prefix = module[1]
    code, out, _ = run_named(
        capsys, module, "bad", "--all-cases", "--failures-only", *REFERENCE_ONLY
    )
    assert code == 1
    assert f"== {prefix}.bad [big]:" in out and f"== {prefix}.bad [small]:" in out
    assert "is the reference" not in out  # only failed rows are printed


def test_primitive_without_benchmark_data_is_skipped_with_a_reason(capsys, module):
    prefix = module[1]
    code, _, err = run_named(capsys, module, "no_data")
    assert code == 1
    assert f"skipping {prefix}.no_data (needs def_call and def_benchmark_data)" in err
    assert "no registered primitive can be checked (matched 1)" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--checks", "vmap"], "unknown check(s) vmap; choose from abstract_eval"),
        (["--rtol", "x"], "invalid float value: 'x'"),
    ],
)
def test_usage_errors_exit_two(capsys, module, argv, message):
    code, _, err = run_named(capsys, module, "good", *argv)
    assert code == 2
    assert message in err


def test_unknown_backend_exits_two(capsys, module):
    code, _, err = run_named(capsys, module, "good", "--backends", "warp,shifted")
    assert code == 2
    assert "--backends warp: not registered by any selected primitive" in err


def test_backends_filter_applies_per_primitive(capsys, module):
    code, out, _ = run_named(
        capsys, module, "good", "--backends", "shifted", "--checks", "determinism"
    )
    assert code == 0
    assert "jax_raw" not in out.split("\n", 1)[1]


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_catalog_primitive_from_the_command_line(capsys):
    code = main(
        [
            "check",
            "polykernel.catalog.scaled_add",
            "--checks",
            "determinism,jit_vs_eager",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    from polykernel.catalog import scaled_add_p
    from polykernel.testing.runner import present_platforms

    # Two checks per backend of each platform present (the GPU's under test-gpu;
    # how many depends on what is installed: warp, ...).
    n_checks = 2 * sum(
        len(scaled_add_p.available_backends(p)) for p in present_platforms()
    )
    assert (
        f"== polykernel.catalog.scaled_add [n=1e+03]: {n_checks} passed, 0 failed"
        in out
    )
