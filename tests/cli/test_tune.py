"""``polykernel tune``: tune a module's primitives, then show, report, export, clear."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
import zygote
from subprocess_support import SUPPORT

MODULE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {support!r})
    import numpy as np
    import polykernel as pk
    from tuning_ops import make_op
    OP = make_op("cli_tune.double")

    def cases(*, platform):  # --data: cases of the user's choosing
        return [pk.BenchmarkConfig("mine n=64", (np.ones(64, np.float32),))]

    def no_cases(*, platform):  # a --data function that forgot its return
        pass
    """
)


@pytest.fixture
def cli(tmp_path, run_env):
    target = tmp_path / "ops_to_tune.py"
    target.write_text(MODULE.format(support=str(SUPPORT)))
    env = {**run_env, "POLYKERNEL_CONFIG_DIR": str(tmp_path / "config")}

    def run(*args: str) -> subprocess.CompletedProcess:
        # A child of the test process's zygote: as `python -m polykernel.cli` runs.
        argv = ["-m", "polykernel.cli", "tune", *args]
        return zygote.run(argv, env=env, cwd=tmp_path, timeout=300)

    run.target = str(target)  # type: ignore[attr-defined]
    run.config = tmp_path / "config"  # type: ignore[attr-defined]
    return run


@pytest.mark.slow
def test_tune_then_show_report_export_and_clear(cli, tmp_path):
    # One pass: this test is about the command's files and listings; how passes
    # time the cases again is tests/tuning's (the default two would double it).
    tuned = cli(f"{cli.target}:double", "--max-seconds", "60", "--passes", "1",
                "--json", "r.json")  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    assert "tuning cli_tune.double (2 cases)" in tuned.stdout
    # Within 100 columns, but a path longer than that: alone on its line, whole.
    long = [x for x in tuned.stdout.splitlines() if len(x) > 100]
    assert all(x.split() == [str(cli.config / "tuned.json")] for x in long), long
    report = json.loads((tmp_path / "r.json").read_text())
    assert [c["label"] for c in report[0]["cases"]] == ["n=1000", "n=100000"]
    table = json.loads((cli.config / "tuned.json").read_text())
    assert len(table["entries"]["cli_tune.double"]) == 2

    shown = cli("--show", "cli_tune.double")
    assert shown.returncode == 0, shown.stderr
    assert "cli_tune.double: 2 entries" in shown.stdout
    assert "  cpu bucket [10] (tuned): " in shown.stdout
    assert shown.stdout.rstrip().endswith("2 entries")
    everything = cli("--show")  # the catalog's shipped entries are listed too
    assert "shipped table:" in everything.stdout
    assert "polykernel.catalog.scaled_add: " in everything.stdout

    explained = cli("--report", f"{cli.target}:double")
    assert explained.returncode == 0, explained.stderr
    assert "n=1000: cli_tune.double on cpu:" in explained.stdout
    assert "[exact]" in explained.stdout

    exported = cli("--export", "ship.json")
    assert (
        exported.returncode == 0 and "wrote 2 entries to ship.json" in exported.stdout
    )
    assert (
        json.loads((tmp_path / "ship.json").read_text())["format"] == "polykernel.tuned"
    )

    cleared = cli("--clear")
    assert cleared.stdout.strip() == "cleared 1 primitive: cli_tune.double"
    assert cli("--show", "cli_tune.double").stdout.rstrip().endswith("0 entries")


@pytest.mark.slow  # over a second here (a subprocess)
def test_report_on_cases_given_with_data(cli):
    done = cli("--report", f"{cli.target}:double", "--data", f"{cli.target}:cases")
    assert done.returncode == 0, done.stderr
    assert "mine n=64: cli_tune.double on cpu:" in done.stdout
    assert "[default]" in done.stdout  # nothing tuned in this config directory


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give a TARGET (module, file.py or MODULE:NAME) to tune"),
        (("{target}:nope",), "no primitive named 'nope'"),
        (("no_such_module_xyz",), "cannot import module 'no_such_module_xyz'"),
        (("--report", "{target}", "--data", "{target}"), "give MODULE:FUNCTION"),
        (("--report", "{target}", "--data", "{target}:nope"), "no function 'nope'"),
        (
            ("{target}:double", "--data", "{target}:no_cases"),
            "the function returned NoneType None; it must return a non-empty list of "
            "BenchmarkConfig",
        ),
        (("{target}:double", "--backends", "nope"), "--backends nope: ['nope'] not"),
    ],
    ids=[
        "no-target",
        "unknown-name",
        "missing-module",
        "data-no-function",
        "data-unknown-function",
        "data-returns-none",
        "unknown-backend",
    ],
)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_usage_errors_exit_2_with_one_line(cli, args, message):
    done = cli(*(a.format(target=cli.target) for a in args))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("seconds", ["nan", "0", "-1", "inf", "x"])
def test_a_budget_that_is_no_budget_is_a_usage_error(cli, seconds):
    done = cli(f"{cli.target}:double", "--max-seconds", seconds)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"polykernel tune: error: argument --max-seconds: expected a finite number "
        f"of seconds > 0, got {seconds!r}"
    )
