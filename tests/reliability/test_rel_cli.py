"""Bad ``polykernel`` command lines: exit code 2 and a message naming the problem.

The CLI runs in this process (``polykernel.cli.main`` returns the exit code), so
each row is fast and the process must stay usable after it. Rows: argparse usage
errors, and the ones found after parsing (a ``--module`` that calls ``sys.exit``,
a ``--backends`` name no selected primitive has, an unwritable ``--output``).
"""

from __future__ import annotations

import numpy as np
import pytest
from reliability_support import F3, assert_usable

import polykernel as pk
from polykernel import cli
from polykernel.benchmark import BenchmarkConfig

# The rows name files of the running test's tmp_path by these placeholders (the
# table is built at import; the test writes the files and fills the names in).
TMP = "{tmp}"
EXITS, EXITS_MSG, A_FILE = f"{TMP}/exits.py", f"{TMP}/exits_msg.py", f"{TMP}/plain.txt"
_FILES = {
    "exits.py": "import sys\nsys.exit(3)\n",
    "exits_msg.py": "raise SystemExit('bye')\n",
    "plain.txt": "x",
}

BENCH = pk.XLACustomKernel("reliability.cli.bench")
BENCH.def_jax_raw_kernel(lambda outs, **kw: lambda x: x + 1, platform="cpu")
BENCH.def_call(lambda x: BENCH(x, outs=F3))
BENCH.def_benchmark_data(
    lambda *, platform: [BenchmarkConfig("n=3", (np.ones(3, np.float32),))]
)
NAME = BENCH.name
FAST = ["--no-catalog", "--n-runs", "1", "--n-warmup", "0", "--no-progress"]


def row(id: str, argv: list[str], message: str):
    return pytest.param(argv, message, id=id, marks=pytest.mark.bad_input)


CLI = [
    row("no-command", [], r"the following arguments are required: COMMAND"),
    row("unknown-command", ["explode"], r"invalid choice: 'explode'"),
    row("unknown-option", ["list", "--colour"], r"unrecognized arguments: --colour"),
    row("n-runs-zero", ["benchmark", "--n-runs", "0"], r"expected an integer >= 1"),
    row("n-runs-text", ["benchmark", "--n-runs", "x"], r"got 'x'"),
    row("n-warmup-negative", ["benchmark", "--n-warmup", "-1"], r">= 0, got '-1'"),
    row("n-batch-zero", ["benchmark", "--n-batch-per-run", "0"], r">= 1, got '0'"),
    row("rtol-text", ["benchmark", "--rtol", "tight"], r"invalid float value: 'tight'"),
    row("platform-unknown", ["benchmark", "--platform", "xpu"],
        r"argument --platform: invalid choice: 'xpu'"),
    row("output-suffix", ["benchmark", "-o", "r.pkl"], r"'r.pkl' must end in .json"),
    row("plot-suffix", ["benchmark", "--plot", "r.svg"], r"'r.svg' must end in .png"),
    row("output-unwritable", ["benchmark", NAME, *FAST, "-o", f"{A_FILE}/r.json"],
        r"--output .*plain.txt/r.json: cannot create it because '.*plain.txt' is not "
        r"a directory"),
    row("output-is-directory", ["benchmark", NAME, *FAST, "-o", TMP + "/"],
        r"must end in .json|is a directory"),
    row("plot-unwritable", ["benchmark", NAME, *FAST, "--plot", f"{A_FILE}/p.png"],
        r"--plot .*plain.txt/p.png: cannot create it"),
    row("backends-unknown", ["benchmark", NAME, *FAST, "--backends", "warpp"],
        r"--backends warpp: not registered on cpu by any selected primitive "
        r"\(registered: jax_raw\)"),
    row("check-backends-unknown", ["check", NAME, "--no-catalog", "--backends", "x"],
        r"--backends x: not registered by any selected primitive"),
    row("check-checks-unknown", ["check", "--checks", "vibes"],
        r"unknown check\(s\) vibes"),
    row("module-calls-sys-exit", ["list", "--no-catalog", "-m", EXITS],
        r"module '.*exits.py' called sys.exit\(3\) while being imported"),
    row("module-raises-systemexit", ["list", "--no-catalog", "-m", EXITS_MSG],
        r"called sys.exit\('bye'\) while being imported"),
    row("benchmark-module-exits", ["benchmark", *FAST, "-m", EXITS],
        r"called sys.exit\(3\)"),
    row("cache-no-action", ["cache"], r"required: ACTION|invalid choice|required"),
    row("cache-prune-nothing", ["cache", "prune"], r"--max-bytes|--max-age"),
    row("cache-prune-negative", ["cache", "prune", "--max-bytes", "-5"],
        r"expected an integer >= 0, got '-5'"),
    row("cache-prune-age-text", ["cache", "prune", "--max-age", "old"], r"'old'"),
    row("defaults-unknown-action", ["defaults", "reset"], r"invalid choice: 'reset'"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), CLI)
def test_bad_command_lines_exit_2_with_a_message(argv, message, capsys, tmp_path):
    for name, text in _FILES.items():
        (tmp_path / name).write_text(text)
    code = cli.main([arg.replace(TMP, str(tmp_path)) for arg in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip(), "a usage error must say what is wrong"
    assert "Traceback" not in err
    import re

    assert re.search(message, err), err
    assert_usable()
    assert cli.main(["list", NAME, "--no-catalog"]) == 0  # the CLI still works
    assert NAME in capsys.readouterr().out
