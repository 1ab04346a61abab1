"""The zygote (``zygote.py``) runs each script as ``python SCRIPT`` would, in a fresh
process: the docs blocks and examples rely on it (issue 37, item 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import zygote
from zygote import run_script

pytestmark = pytest.mark.slow  # starts a process that imports JAX (about 2 s)

REPORT = """
import json, os, sys, threading
from jax._src import xla_bridge
print(json.dumps({
    "pid": os.getpid(), "cwd": os.getcwd(), "argv": sys.argv, "path0": sys.path[0],
    "name": __name__, "file": __file__, "stdin": sys.stdin.read(),
    "env": os.environ.get("ZYGOTE_TEST"), "test": os.environ["PYTEST_CURRENT_TEST"],
    "backend": xla_bridge.backends_are_initialized(),
    "threads": threading.active_count(), "mine": "left" in globals(),
}))
left = 1
"""


def _script(tmp_path: Path, source: str, name: str = "script.py") -> Path:
    folder = tmp_path / "scripts"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(source)
    return folder / name


def test_each_script_runs_in_a_fresh_process_of_its_own(run_env, tmp_path):
    script = _script(tmp_path, REPORT)
    runs, served_by = [], set()
    for n in range(2):
        cwd = tmp_path / f"cwd{n}"
        cwd.mkdir()
        # PYTEST_CURRENT_TEST differs per test; the same zygote serves both.
        env = dict(run_env, ZYGOTE_TEST="given", PYTEST_CURRENT_TEST=f"run {n}")
        proc = run_script(script, "a", str(n), env=env, cwd=cwd)
        served_by.add(id(zygote.zygotes["full"]))
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
        assert runs[-1] == {
            **runs[-1],
            "cwd": str(cwd),
            "argv": [str(script), "a", str(n)],
            "path0": str(script.parent),
            "name": "__main__",
            "file": str(script),
            "stdin": "",
            "env": "given",
            "test": f"run {n}",
            "backend": False,  # nothing started before the fork
            "threads": 1,
            "mine": False,  # an empty namespace
        }
    assert len({r["pid"] for r in runs} | {os.getpid()}) == 3
    assert len(served_by) == 1


@pytest.mark.parametrize(
    ("source", "code", "stderr"),
    [
        ("raise ValueError('bad')", 1, "ValueError: bad"),
        ("import sys; sys.exit(3)", 3, ""),
        ("import sys; sys.exit('no')", 1, "no"),
        ("import os; print('kept', flush=True); os._exit(9)", 9, ""),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -9, ""),
    ],
    ids=["exception", "exit-3", "exit-message", "os-exit", "killed"],
)
def test_exit_statuses_and_output_are_those_of_python_script(
    source, code, stderr, run_env, tmp_path
):
    script = _script(tmp_path, source)
    fresh = subprocess.run(
        [sys.executable, str(script)], env=run_env, capture_output=True, text=True
    )
    forked = run_script(script, env=run_env)
    assert (forked.returncode, forked.stdout) == (code, fresh.stdout)
    assert fresh.returncode == code and stderr in forked.stderr


def test_a_script_past_its_timeout_is_killed_and_the_next_one_runs(run_env, tmp_path):
    sleeper = _script(tmp_path, "import time\nprint('started', flush=True)\n"
                      "time.sleep(120)\n")  # fmt: skip
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        run_script(sleeper, env=run_env, timeout=3)
    assert timed_out.value.output == b"started\n"
    proc = run_script(_script(tmp_path, "print('next')", "next.py"), env=run_env)
    assert (proc.returncode, proc.stdout) == (0, "next\n")


def test_another_environment_gets_a_zygote_that_imported_under_it(run_env, tmp_path):
    script = _script(tmp_path, "import jax\nprint(jax.config.jax_enable_x64)\n")
    assert run_script(script, env=run_env).stdout == "False\n"
    first = zygote.zygotes["full"]
    # JAX reads JAX_ENABLE_X64 when it is imported, in the zygote.
    assert run_script(script, env=dict(run_env, JAX_ENABLE_X64="1")).stdout == "True\n"
    assert zygote.zygotes["full"] is not first


# What a zygote's preload reads from the environment while it is imported: every
# read of os.environ by name, traced in a fresh process. Listing it is not reading
# each variable (Numba lists it for the names that start with NUMBA_).
TRACE_READS = """
import importlib, json, os, sys
read, listing = set(), []
class Traced(type(os.environ)):
    def __iter__(self):
        listing.append(1)
        try:
            yield from super().__iter__()
        finally:
            listing.pop()
    def __getitem__(self, key):
        if not listing:
            read.add(key)
        return super().__getitem__(key)
    def __contains__(self, key):
        read.add(key)
        return super().__contains__(key)
os.environ.__class__ = Traced
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(read)))
"""


@pytest.mark.parametrize("kind", sorted(zygote.PRELOADS))
def test_no_variable_a_child_gets_its_own_of_is_read_by_the_preload(kind, run_env):
    proc = subprocess.run(
        [sys.executable, "-c", TRACE_READS, *zygote.PRELOADS[kind]],
        env=run_env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    read = json.loads(proc.stdout.splitlines()[-1])
    assert any(name.startswith("JAX_") for name in read)  # the trace sees reads
    assert [name for name in read if zygote.per_child(name, kind)] == []


SHOW = "import json, sys; print(json.dumps([sys.argv, sys.path, sys.stdin.read(), {}]))"


def _fresh_and_forked(argv, env, cwd, input=None):
    """``python *argv`` run fresh and by the ``jax`` zygote: their outputs."""
    fresh = subprocess.run([sys.executable, *argv], env=env, cwd=cwd, input=input,
                           capture_output=True, text=True)  # fmt: skip
    forked = zygote.run(argv, env=env, cwd=cwd, input=input)
    for proc in (fresh, forked):
        assert proc.returncode == 0, proc.stderr
    return fresh.stdout, forked.stdout


def test_run_gives_code_and_modules_the_argv_path_and_stdin_of_a_fresh_python(
    run_env, tmp_path
):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "shown.py").write_text(SHOW.replace("{}", "__name__"))
    for n, pythonpath in enumerate((str(lib), f"{lib}{os.pathsep}{tmp_path}")):
        env = dict(run_env, PYTHONPATH=pythonpath, NUMBA_NUM_THREADS=str(n + 1))
        for argv in (["-c", SHOW.replace("{}", "'__file__' in globals()"), "x"],
                     ["-m", "shown", "y", "z"]):  # fmt: skip
            fresh, forked = _fresh_and_forked(argv, env, tmp_path, input="given\n")
            assert json.loads(forked) == json.loads(fresh)
        # Numba is not preloaded: a child imports it under its own settings.
        code = ("import sys; print('numba' in sys.modules); import numba; "
                "print(numba.config.NUMBA_NUM_THREADS)")  # fmt: skip
        out = zygote.run(["-c", code], env=env, cwd=tmp_path).stdout
        assert out == f"False\n{n + 1}\n"
    assert len({id(z) for z in zygote.zygotes.values()}) == len(zygote.zygotes)


def test_a_zygote_serves_only_a_pythonpath_with_its_sitecustomize(run_env, tmp_path):
    # Python imports sitecustomize at start-up (the run's: its GC settings), so a
    # zygote started with a PYTHONPATH without it cannot serve one with it, which
    # the next test file of the worker would then ask for (and the reverse).
    code = "import sys; print(getattr(sys.modules.get('sitecustomize'), '__file__', 0))"
    bare = dict(run_env, PYTHONPATH=str(tmp_path))
    outputs = []
    for env in (bare, run_env, bare):
        fresh, forked = _fresh_and_forked(["-c", code], env, tmp_path)
        assert forked == fresh
        outputs.append(forked)
    site = os.path.join(run_env["PYTHONPATH"].split(os.pathsep)[0], "sitecustomize.py")
    assert outputs == ["0\n", site + "\n", "0\n"]


def test_run_exits_as_python_does(run_env, tmp_path):
    for code, status in (("raise ValueError('bad')", 1), ("raise SystemExit(4)", 4)):
        proc = zygote.run(["-c", code], env=run_env, cwd=tmp_path)
        assert proc.returncode == status
    assert "ValueError: bad" in zygote.run(["-c", "raise ValueError('bad')"],
                                           env=run_env).stderr  # fmt: skip


# Each child says it is there, then waits until all three are: only children that
# run at the same time get past the wait.
TOGETHER = """
import os, sys, time
folder, me, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
open(os.path.join(folder, me), "w").close()
end = time.monotonic() + 60
while len(os.listdir(folder)) < 3 and time.monotonic() < end:
    time.sleep(0.01)
print(me, len(os.listdir(folder)), sys.stdin.read(), flush=True)
print("to stderr", file=sys.stderr, flush=True)
sys.exit(status)
"""


def test_started_children_run_at_the_same_time_as_popen_children_do(run_env, tmp_path):
    import signal

    folder = tmp_path / "here"
    folder.mkdir()
    log = tmp_path / "c.log"
    children = [
        zygote.start(["-c", TOGETHER, str(folder), "a", "0"], env=run_env),
        zygote.start(["-c", TOGETHER, str(folder), "b", "3"], env=run_env, input="in"),
        zygote.start(["-c", TOGETHER, str(folder), "c", "0"], env=run_env,
                     stdout=log, stderr=subprocess.STDOUT),
    ]  # fmt: skip
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 3, 0]
    assert outputs[:2] == [("a 3 \n", "to stderr\n"), ("b 3 in\n", "to stderr\n")]
    assert outputs[2] == ("", "")  # written to the file, not captured
    assert log.read_text() == "c 3 \nto stderr\n"  # one file, in order
    assert len({child.pid for child in children} | {os.getpid()}) == 4
    # A signal reaches the child; one after its exit is nothing (as for Popen).
    sleeper = zygote.start(["-c", "import time; time.sleep(120)"], env=run_env)
    assert sleeper.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.2)
    sleeper.send_signal(signal.SIGTERM)
    assert sleeper.wait(timeout=60) == -signal.SIGTERM
    sleeper.kill()
    assert sleeper.poll() == -signal.SIGTERM


def test_a_zygote_with_children_running_keeps_them_when_another_replaces_it(
    run_env, tmp_path
):
    code = "import sys, time; time.sleep(float(sys.argv[1])); print('done')"
    child = zygote.start(["-c", code, "2"], env=run_env)
    first = zygote.zygotes["jax"]
    # JAX reads JAX_ENABLE_X64 at its import: another zygote serves this one.
    other = zygote.run(["-c", code, "0"], env=dict(run_env, JAX_ENABLE_X64="1"))
    assert other.stdout == "done\n" and zygote.zygotes["jax"] is not first
    assert first.alive() and child.communicate(timeout=60) == ("done\n", "")
    assert child.returncode == 0
