"""The run's garbage-collection settings (tests/conftest.py,
tests/support/child_site/sitecustomize.py): every Python process of a test run, this
one, a fresh child and a zygote's forked child, collects with the same thresholds,
and objects imported before the tests ran are frozen out of the collections."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from subprocess_support import last_json, run_python

SITE = Path(__file__).parent / "support" / "child_site"
CHILD = """
import gc, json, sys
print(json.dumps({"thresholds": gc.get_threshold(),
                  "site": sys.modules["sitecustomize"].__file__,
                  "frozen": gc.get_freeze_count()}))
"""


def _thresholds() -> tuple[int, int, int]:
    namespace: dict = {}
    exec((SITE / "sitecustomize.py").read_text(), namespace)
    return namespace["THRESHOLDS"]


def test_this_process_collects_with_the_runs_thresholds_and_froze_its_imports():
    assert gc.get_threshold() == _thresholds() != (700, 10, 10)
    assert gc.get_freeze_count() > 10_000  # what collection imported (JAX, NumPy...)
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(SITE)


def test_children_started_with_the_runs_environment_collect_the_same_way(run_env):
    fresh = last_json(run_python(code=CHILD, env=run_env))
    assert fresh["thresholds"] == list(_thresholds())
    assert Path(fresh["site"]) == SITE / "sitecustomize.py"
    # A fresh interpreter froze nothing of its imports (Python 3.12 starts with a
    # few hundred objects in the permanent generation, 3.11 with none).
    assert fresh["frozen"] < 1_000
    forked = last_json(run_python(code=CHILD, env=run_env, forked=True))
    assert forked["thresholds"] == list(_thresholds())
    assert forked["frozen"] > 10_000  # the zygote froze what it imported


def test_a_child_without_the_runs_pythonpath_keeps_pythons_defaults(run_env):
    env = {k: v for k, v in run_env.items() if k != "PYTHONPATH"}
    code = CHILD.replace(
        'sys.modules["sitecustomize"].__file__',
        'getattr(sys.modules.get("sitecustomize"), "__file__", None)',
    )
    plain = last_json(run_python(code=code, env=env))
    bare = last_json(run_python("-S", "-c", code, env=env))  # no site at all
    assert plain["thresholds"] == bare["thresholds"] != list(_thresholds())
    assert plain["site"] is None or Path(plain["site"]) != SITE / "sitecustomize.py"
