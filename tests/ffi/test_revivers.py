"""Revivers: built-in ones are asked first, and one that declines lets the next try.

A plugin's broad ``target_pattern`` (``.*``, ``pk_.*``, ``pk_numba_.*``) must not
shadow the built-in backends' revivers, whatever the order they were declared in: a
Numba program exported in one process still loads in another that registered such a
plugin first.
"""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from subprocess_support import last_json, run_python

import polykernel as pk
from polykernel.ffi import targets

# its fixtures: isolated_table, entry_points (the line sat inside the child's
# source string, so this file found them only when another file of its worker
# had loaded the plugin)
pytest_plugins = ("plugin_support",)

NUMBA_TARGET = "pk_numba_" + "0" * 24
BROAD = [".*", "pk_.*", "pk_numba_.*"]


def _recorder(log: list[str], name: str, answer: bool):
    def hook(target: str, program: str) -> bool:
        log.append(name)
        return answer

    return hook


@pytest.mark.parametrize("pattern", BROAD)
def test_a_broad_plugin_pattern_does_not_shadow_the_builtin_revivers(
    isolated_table, pattern
):
    # The plugin first, as in a process that registers it before load_exported.
    pk.register_backend(pk.Backend(name="pk_greedy", target_pattern=pattern,
                                   reviver="pk_greedy_plugin:revive"))  # fmt: skip
    pk.backends.install_revivers()
    assert [b for b, _ in targets.revivers_for(NUMBA_TARGET)] == ["numba", "pk_greedy"]
    assert targets.reviver_for(NUMBA_TARGET)[0] == "numba"
    assert targets.reviver_for("pk_warp_" + "0" * 24)[0] == "warp"
    assert targets.reviver_for("polykernel_gpu_launch")[0] == "gpu_launcher"


# (revivers in declaration order: (backend, pattern, builtin, answer); target;
#  who is asked, in order; what revive returns)
ORDER = {
    "declined_then_next": ([("a", "x_.*", False, False), ("b", r"x_\d", False, True)],
                           "x_1", ["a", "b"], True),
    "first_accepts": ([("a", "x_.*", False, True), ("b", r"x_\d", False, True)],
                      "x_1", ["a"], True),
    "all_decline": ([("a", "x_.*", False, False), ("b", r"x_\d", False, False)],
                    "x_1", ["a", "b"], False),
    "only_matching": ([("a", "x_.*", False, False), ("b", r"x_\d", False, True)],
                      "x_y", ["a"], False),
    "builtin_first": ([("plugin", "x_.*", False, True), ("core", "x_1", True, True)],
                      "x_1", ["core"], True),
    "builtin_declines": ([("plugin", "x_.*", False, True),
                          ("core", "x_1", True, False)],
                         "x_1", ["core", "plugin"], True),
    "none_matches": ([("a", "x_.*", False, True)], "y_1", [], None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ORDER))
def test_revivers_are_asked_in_turn_until_one_registers(isolated_table, case):
    declared, target, asked, result = ORDER[case]
    targets._revivers.clear()
    log: list[str] = []
    for backend, pattern, builtin, answer in declared:
        targets.add_reviver(backend, pattern, _recorder(log, backend, answer),
                            builtin=builtin)  # fmt: skip
    assert targets.revive(target, "program") is result
    assert log == asked


def test_declaring_a_backend_again_replaces_its_reviver(isolated_table):
    targets._revivers.clear()
    log: list[str] = []
    targets.add_reviver("a", "old_.*", _recorder(log, "old", True))
    targets.add_reviver("a", "new_.*", _recorder(log, "new", True))
    assert targets.revive("old_1") is None and targets.revive("new_1") is True
    assert log == ["new"] and len(targets._revivers) == 1


def test_a_bad_reviver_pattern_is_our_error():
    with pytest.raises(pk.KernelRegistrationError, match=r"the reviver of backend "
                       r"'a': target pattern '\(' is not a regular expression") as info:
        targets.add_reviver("a", "(", _recorder([], "a", True))
    assert isinstance(info.value.__cause__, re.error)


# Run in a child of the jax zygote: polykernel imported, nothing registered or
# revived since, as in a fresh process once it imported polykernel; the code runs
# as the child's own __main__, where the reviver "__main__:decline" is found.
CHILD = """
import json, sys
import numpy as np
import polykernel as pk

asked = []

def decline(target, program):
    asked.append(target)
    return False

pk.register_backend(pk.Backend(name="pk_greedy", target_pattern=sys.argv[2],
                               reviver="__main__:decline"))
try:
    exported = pk.load_exported(open(sys.argv[1], "rb").read())
    out = np.asarray(exported.call(np.arange(8, dtype=np.float32))).tolist()
    print(json.dumps({"out": out, "asked": asked}))
except Exception as err:
    print(json.dumps({"error": type(err).__name__, "message": str(err),
                      "asked": asked}))
"""


@pytest.fixture(scope="module")
def numba_program(tmp_path_factory) -> tuple[Path, str]:
    numba = pytest.importorskip("numba")

    @numba.njit
    def plus_one(x, out):
        for i in range(out.size):
            out[i] = x[i] + 1

    spec = jax.ShapeDtypeStruct((8,), jnp.float32)
    exported = pk.export(jax.jit(pk.numba_kernel(plus_one, spec)))(spec)
    path = tmp_path_factory.mktemp("revivers") / "numba.jaxexport"
    path.write_bytes(exported.serialize())
    (target,) = pk.exported_targets(exported)
    return path, target


@pytest.mark.slow
@pytest.mark.parametrize("pattern", BROAD)
def test_a_numba_program_loads_beside_a_greedy_plugin(numba_program, run_env, pattern):
    path, _ = numba_program
    report = last_json(run_python("-c", CHILD, path, pattern, env=run_env, forked=True))
    assert report.get("error") is None, report
    assert report["out"] == [float(i + 1) for i in range(8)]
    assert report["asked"] == []  # the built-in reviver registered it first


@pytest.mark.slow
def test_when_the_builtin_declines_the_plugin_is_asked(numba_program, run_env,
                                                       tmp_path):  # fmt: skip
    path, target = numba_program
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(tmp_path / "empty-cache")}
    report = last_json(run_python("-c", CHILD, path, ".*", env=env, forked=True))
    assert report["asked"] == [target]  # numba declined (no cache): the next tried
    assert report["error"] == "KernelNotAvailableError"
    assert f"'{target}' (numba)" in report["message"]
