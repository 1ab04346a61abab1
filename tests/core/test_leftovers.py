"""Runs leave nothing behind (issue 37): nothing in the temp dir, nothing under ``~``.

A child ``pytest``, given a temp dir and a home of its own, runs one test of each
module that used to leave a folder in the temp dir (module-level ``mkdtemp`` in
``tests/reliability/``, the ctypes plugin's compiled libraries, a child process
killed before its atexit cleanup); the conftest's run directory goes there too,
and the run's ``TMPDIR`` (pytest's ``tmp_path`` included) inside it. Afterwards
the temp dir and the home hold nothing. The Makefile points
the caches of the tools its recipes run under the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from subprocess_support import REPO

NODES = [
    "tests/reliability/test_rel_cli.py::test_bad_command_lines_exit_2_with_a_message"
    "[output-unwritable]",
    "tests/reliability/test_rel_scale.py::test_scale_bad_inputs[build_directory-a-file]",
    "tests/reliability/test_rel_files.py::test_damaged_result_files[json-empty]",
    "tests/contract/test_out_of_tree_backend.py::test_the_plugin_is_in_the_backend_table",
    "tests/core/test_leftovers.py::test_a_killed_childs_private_folder_is_in_the_run_dir",
]
#: Variables of this run that would steer the child's files elsewhere.
_OURS = ("POLYKERNEL_", "XDG_", "NUMBA_CACHE", "MPLCONFIGDIR", "WARP_CACHE_PATH",
         "TRITON_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "PYTEST_",
         "TMPDIR")  # fmt: skip


@pytest.mark.slow
def test_a_test_run_leaves_nothing_in_the_temp_dir_or_the_home(tmp_path):
    tmp, home = tmp_path / "tmp", tmp_path / "home"
    tmp.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OURS)}
    env.update(TMPDIR=str(tmp), HOME=str(home))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NODES]
    proc = subprocess.run(
        argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{len(NODES)} passed" in proc.stdout, proc.stdout[-3000:]
    left = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*"))
    assert left == [], left
    assert sorted(home.rglob("*")) == []


KILLED = """
import os, signal
from polykernel.native.cache import private_dir
folder = private_dir()  # removed at exit, but this process never exits
(folder / "lib.so").write_bytes(b"")
print(folder, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_childs_private_folder_is_in_the_run_dir():
    # Killed, a process leaves its private folder: in the run's TMPDIR, which the
    # run removes, never in the system's temp dir.
    proc = subprocess.run([sys.executable, "-c", KILLED], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == -9, proc.stderr
    folder = os.path.realpath(proc.stdout.strip())
    run_tmp = os.path.realpath(os.environ["TMPDIR"])
    assert folder.startswith(run_tmp + os.sep), (folder, run_tmp)
    assert os.path.basename(os.path.dirname(run_tmp)).startswith("polykernel-tests-")


#: The tools whose caches default to ``~`` and the Makefile's variable for each.
TOOL_CACHES = {
    "pip": "PIP_CACHE_DIR",
    "uv (make's installer)": "UV_CACHE_DIR",
    "matplotlib (make docs draws plots)": "MPLCONFIGDIR",
    "pyright": "PYRIGHT_PYTHON_CACHE_DIR",
    "npm (run by pyright)": "npm_config_cache",
    "the CUDA driver's JIT": "CUDA_CACHE_PATH",
}


def test_the_makefile_keeps_every_tool_cache_under_the_checkout():
    text = (REPO / "Makefile").read_text()
    assert re.search(r"^RUN_DIR := \$\(CURDIR\)/", text, re.M)
    missing = [
        tool
        for tool, var in TOOL_CACHES.items()
        if not re.search(rf"^export {var} \?= \$\(RUN_DIR\)/\w+$", text, re.M)
    ]
    assert missing == []
