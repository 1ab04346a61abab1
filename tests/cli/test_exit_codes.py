"""Exit codes and one-line errors of every command that imports user code.

``cache warm`` targets and ``--module`` values go through one loader
(``polykernel.cli.targets``), so each case is one row per command: 2 for a usage
error (malformed or missing target, ``sys.exit`` while importing, an unknown
``--platform``), 1 for a failure (a module whose import raises, a primitive whose
benchmark data raises or calls ``sys.exit`` — the others still run —, a function
target that raises or calls ``sys.exit``), 0 otherwise; every error is one line of
stderr. The CLI runs in this process (``main`` returns the code); the last tests run
the real command, whose exit status must be the same.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import zygote

from polykernel import cli

PRIMS = textwrap.dedent(
    """
    import sys
    import jax
    import numpy as np
    import polykernel as pk
    from polykernel.benchmark import BenchmarkConfig

    def make(name, data):
        op = pk.XLACustomKernel(name)
        op.def_jax_raw_kernel(lambda outs, **kw: (lambda x: [x * 2.0]), platform="cpu")
        def call(x, *, backend=None):
            return op(x, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)],
                      backend=backend)[0]
        op.def_call(call)
        op.def_benchmark_data(data)
        return op

    def good(*, platform):
        return [BenchmarkConfig("n=4", (np.ones(4, np.float32),))]

    def raises(*, platform):
        raise ValueError("no data here")

    def exits(*, platform):
        sys.exit(3)

    first = make("{uid}.first", {first})
    second = make("{uid}.second", good)
    """
)
FUNCTIONS = textwrap.dedent(
    """
    import sys

    def ok():
        pass

    def exits():
        sys.exit(0)

    def exits_msg():
        sys.exit("stop here")

    def raises():
        raise RuntimeError("function broke")

    def needs(x):
        pass
    """
)
# stem -> source ({uid} is this test's own prefix: names never repeat in a process)
FILES = {
    "good": PRIMS.replace("{first}", "good"),
    "bad_data": PRIMS.replace("{first}", "raises"),
    "exit_data": PRIMS.replace("{first}", "exits"),
    "fns": FUNCTIONS,
    "exit0": "import sys\nsys.exit(0)\n",
    "exit_msg": "import sys\nsys.exit('no thanks')\n",
    "broken": "raise RuntimeError('boom in setup')\n",
    "inner": "import no_such_dependency_xyz\n",
}
SHADOW = "shadow/json.py"  # named like the standard library's json


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Every module of the table, as ``<uid>_<stem>.py`` (importable by name too),
    and ``shadow/json.py``; ``{dir}``/``{uid}`` placeholders' values."""
    uid = f"t{uuid.uuid4().hex[:8]}"
    for stem, source in FILES.items():
        text = source.replace("{uid}", f"{uid}.{stem}")
        (tmp_path / f"{uid}_{stem}.py").write_text(text)
    (tmp_path / "shadow").mkdir()
    (tmp_path / SHADOW).write_text(PRIMS.replace("{first}", "good").replace(
        "{uid}", f"{uid}.shadow"))  # fmt: skip
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])  # restored after
    return {"dir": str(tmp_path), "uid": uid}


def run(capsys, argv: list[str], values: dict[str, str]) -> tuple[int, str, str]:
    code = cli.main([a.format(**values) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def row(id: str, argv: str, code: int, err: str | None, out: str | None = None):
    return pytest.param(argv.split(), code, err, out, id=id)


WARM = ["cache", "warm", "--platform", "cpu"]
BENCH = "--no-catalog --n-runs 1 --n-warmup 0 --no-progress"
W = " ".join(WARM)
F = "{dir}/{uid}"
CASES = [
    # -- cache warm: targets that cannot be read (usage: 2)
    row("warm-dot", f"{W} .", 2, r"target '\.': not a module name or a \.py file"),
    row("warm-relative", f"{W} .mod", 2, r"target '\.mod': not a module name"),
    row("warm-trailing-dot", f"{W} mod.", 2, r"target 'mod\.': not a module name"),
    row("warm-no-module", f"{W} :f", 2, r"target ':f': not a module name"),
    row("warm-missing-file", f"{W} nope/prims.py", 2, r"no such file: nope/prims\.py"),
    row("warm-missing-module", f"{W} no_such_mod_xyz", 2,
        r"cannot import module 'no_such_mod_xyz' \(ModuleNotFoundError"),
    row("warm-platform", f"{W} {{uid}}_good --platform fpga", 2,
        r"argument --platform: invalid choice: 'fpga'"),
    # -- cache warm: functions that cannot be named, found or called (usage: 2)
    row("warm-no-function", f"{W} {{uid}}_fns:", 2, r"'' is not a function name"),
    row("warm-no-such-function", f"{W} {{uid}}_fns:nothing", 2,
        r"module '.*_fns' has no function 'nothing'"),
    row("warm-bad-function", f"{W} {{uid}}_fns:1f", 2, r"'1f' is not a function name"),
    row("warm-function-needs-args", f"{W} {{uid}}_fns:needs", 2,
        r"needs\(x\) needs arguments; pass a function that takes none"),
    # -- cache warm: modules whose import exits (usage: 2) or fails (failure: 1)
    row("warm-import-exits-0", f"{W} {F}_exit0.py", 2,
        r"module '.*_exit0\.py' called sys\.exit\(0\) while being imported"),
    row("warm-import-exits-msg", f"{W} {{uid}}_exit_msg", 2,
        r"called sys\.exit\('no thanks'\) while being imported"),
    row("warm-import-raises", f"{W} {{uid}}_broken", 1,
        r"cannot import module '.*_broken' \(RuntimeError: boom in setup\)"),
    row("warm-import-dependency", f"{W} {F}_inner.py", 1,
        r"No module named 'no_such_dependency_xyz'"),
    # -- cache warm: what runs fails (reported, the others go on, exit 1)
    row("warm-ok", f"{W} {{uid}}_good", 0, None,
        r"\.good\.second jax_raw n=4: ready\n.*_good: 2 primitives"),
    row("warm-shadowed-name", f"{W} {{dir}}/{SHADOW}", 0, None,
        r"shadow\.first jax_raw n=4: ready\n.*shadow\.second jax_raw n=4: ready\n"
        r".*json\.py: 2 primitives"),
    row("warm-data-raises", f"{W} {{uid}}_bad_data", 1,
        r"error: .*bad_data\.first: benchmark data: ValueError: no data here",
        r"first: FAILED \(ValueError: no data here\)\n.*second jax_raw n=4: ready"),
    row("warm-data-exits", f"{W} {{uid}}_exit_data", 1,
        r"error: .*exit_data\.first: benchmark data: called sys\.exit\(3\)",
        r"second jax_raw n=4: ready"),
    row("warm-function-ok", f"{W} {{uid}}_fns:ok", 0, None, r"_fns:ok: ran"),
    row("warm-function-exits-0", f"{W} {{uid}}_fns:exits {{uid}}_fns:ok", 1,
        r"error: .*_fns:exits: called sys\.exit\(0\)$", r"_fns:ok: ran"),
    row("warm-function-exits-msg", f"{W} {F}_fns.py:exits_msg", 1,
        r"_fns\.py:exits_msg: called sys\.exit\('stop here'\)"),
    row("warm-function-raises", f"{W} {{uid}}_fns:raises", 1,
        r"_fns:raises: RuntimeError: function broke"),
    # -- the other commands, through the same loader
    row("list-dot", "list --no-catalog -m .", 2, r"--module '\.': not a module name"),
    row("list-function", "list --no-catalog -m mod:f", 2, r"'mod:f': not a module"),
    row("list-import-exits-msg", "list --no-catalog -m {uid}_exit_msg", 2,
        r"called sys\.exit\('no thanks'\) while being imported"),
    row("list-import-raises", f"list --no-catalog -m {F}_broken.py", 1,
        r"cannot import module '.*_broken\.py' \(RuntimeError: boom in setup\)"),
    row("list-shadowed-name", f"list --no-catalog -m {{dir}}/{SHADOW}", 0, None,
        r"\.shadow\.first"),
    row("benchmark-data-raises",
        f"benchmark {BENCH} -m {F}_bad_data.py {{uid}}.bad_data.first "
        "{uid}.bad_data.second", 1,
        r"error: .*bad_data\.first: ValueError: no data here",
        r"bad_data\.second on cpu: median.*2 primitives, 1 run, 0 failed"),
    row("benchmark-data-exits",
        f"benchmark {BENCH} -m {F}_exit_data.py {{uid}}.exit_data.first "
        "{uid}.exit_data.second", 1,
        r"error: .*exit_data\.first: called sys\.exit\(3\)",
        r"exit_data\.second on cpu: median.*2 primitives, 1 run, 0 failed"),
    row("check-data-exits",
        f"check --no-catalog --checks abstract_eval -m {F}_exit_data.py "
        "{uid}.exit_data.first {uid}.exit_data.second", 1,
        r"error: .*exit_data\.first: called sys\.exit\(3\)",
        r"== .*exit_data\.second \[n=4\]: "),
    row("benchmark-platform", "benchmark --platform fpga", 2,
        r"argument --platform: invalid choice: 'fpga'"),
    # -- cache prune (nothing to import; the same codes)
    row("prune-bool", "cache prune --max-bytes true", 2,
        r"argument --max-bytes: expected an integer >= 0, got 'true'"),
    row("prune-age-nan", "cache prune --max-age nan", 2,
        r"argument --max-age: expected a number of days >= 0, got 'nan'"),
    row("prune-nothing", "cache prune", 2, r"give --max-bytes N and/or --max-age"),
    row("prune-ok", "cache prune --max-bytes 1000000000000000", 0, None,
        r"^pruned 0 B$"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "code", "err", "out"), CASES)
def test_exit_code_and_one_line_errors(capsys, files, argv, code, err, out):
    got, stdout, stderr = run(capsys, argv, files)
    assert got == code, (stdout, stderr)
    assert "Traceback" not in stderr
    if err is None:
        assert stderr == "", stderr
    else:
        lines = stderr.strip().splitlines()
        if "usage:" not in stderr:  # argparse prints its usage first
            assert all(line.startswith("polykernel ") for line in lines), stderr
        assert any(re.search(err, line) for line in lines), stderr
    if out is not None:
        assert re.search(out, stdout, re.S | re.M), stdout


def test_a_file_target_is_imported_from_its_path_under_its_own_name(capsys, files):
    # A free name: the file's own, so a job importing it builds the same kernels.
    uid = files["uid"]
    assert run(capsys, [*WARM, f"{{dir}}/{uid}_good.py"], files)[0] == 0
    assert Path(sys.modules[f"{uid}_good"].__file__).parent == Path(files["dir"])
    # Named like an imported module: a name of its own, the stdlib json untouched.
    import json

    assert run(capsys, [*WARM, f"{{dir}}/{SHADOW}"], files)[0] == 0
    assert sys.modules["json"] is json and hasattr(json, "dumps")
    (shadow,) = [
        module
        for name, module in sys.modules.items()
        if name.startswith("_polykernel_file_json_")
        and str(getattr(module, "__file__", "")).startswith(files["dir"])
    ]
    assert shadow.first.name == f"{uid}.shadow.first"


def test_a_target_named_twice_is_warmed_once(capsys, files):
    code, out, _ = run(capsys, [*WARM, "{uid}_fns:ok", "{uid}_good", "{uid}_good"],
                       files)  # fmt: skip
    assert code == 0
    assert out.count("second jax_raw n=4: ready") == 1


def _real(args: list[str], run_env: dict, cwd: str) -> subprocess.CompletedProcess:
    # A process of its own (forked by the zygote), as the command runs.
    return zygote.run(
        ["-m", "polykernel.cli", *args],
        env={**run_env, "PYTHONPATH": os.pathsep.join(
            p for p in (cwd, run_env.get("PYTHONPATH")) if p)},
        cwd=cwd, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("target", "code", "err"),
    [
        ("{uid}_fns:exits", 1, r"_fns:exits: called sys\.exit\(0\)"),
        ("{uid}_exit_msg", 2, r"called sys\.exit\('no thanks'\) while being imported"),
    ],
)
def test_the_real_command_exits_with_the_same_codes(files, run_env, target, code, err):
    out = _real([*WARM, target.format(**files)], run_env, files["dir"])
    assert out.returncode == code, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(err, lines[0]), out.stderr
    assert lines[0].startswith("polykernel cache warm: error: ")


def test_user_code_exiting_inside_any_command_is_a_reported_failure(
    monkeypatch, capsys
):
    # The last net: a sys.exit no command caught is exit 1 and one line, never the
    # code it asked for (a silent 0) nor argparse's 2.
    from polykernel.cli import listing

    monkeypatch.setattr(listing, "select", lambda args: sys.exit(0))
    assert cli.main(["list", "--no-catalog"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("polykernel list: error: user code called sys.exit(0) while")
    assert len(err.strip().splitlines()) == 1
