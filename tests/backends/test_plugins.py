"""A broken backend plugin is one warning and one row of ``polykernel info``, never a
broken polykernel.

Every kind of broken ``polykernel.backends`` entry point — a module that does not
import, an object that is not a ``Backend`` (a string, None, a number), a factory
that raises or returns junk, a ``Backend`` class needing arguments, an invalid or
taken name — is one ``PolykernelWarning`` naming the entry point and the cause, and
is skipped: the plugins listed after it load, ``backend_names()`` and
``polykernel info`` work (exit 0), and unrelated calls run.
"""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import zygote

import polykernel as pk
from polykernel import backends

pytest_plugins = ("plugin_support",)  # fixtures: entry_points, distribution

GOOD = "good = plugin_objects:GOOD"

# (entry point value, the cause its warning and row give)
BROKEN = {
    "string": ("plugin_objects:NOT_A_BACKEND",
               r"it is str 'numba', not a polykernel\.Backend"),
    "none": ("plugin_objects:NOTHING",
             r"it is NoneType None, not a polykernel\.Backend"),
    "number": ("plugin_objects:NUMBER", r"it is int 5, not a polykernel\.Backend"),
    "unprintable": ("plugin_objects:UNPRINTABLE",
                    r"it is Unprintable <unprintable>, not a polykernel\.Backend"),
    "factory_raises": ("plugin_objects:raising_factory", r"calling raising_factory\(\) "
                       r"raised RuntimeError: the plugin's factory broke"),
    "factory_junk": ("plugin_objects:junk_factory",
                     r"junk_factory\(\) returned str 'junk', not a "
                     r"polykernel\.Backend"),
    "class_needs_arguments": ("plugin_objects:NeedsArguments",
                              r"calling NeedsArguments\(\) raised TypeError: "
                              r".*'flavour'"),
    "import_error": ("plugin_import_error:BACKEND", r"loading it raised "
                     r"ModuleNotFoundError: No module named 'pk_no_such_dependency'"),
    "missing_module": ("pk_no_such_plugin:BACKEND", r"loading it raised "
                       r"ModuleNotFoundError: No module named 'pk_no_such_plugin'"),
    "missing_attribute": ("plugin_objects:NO_SUCH_NAME",
                          r"loading it raised AttributeError: .*'NO_SUCH_NAME'"),
    "empty_name_when_made": ("plugin_empty_name:BACKEND", r"loading it raised "
                             r"KernelRegistrationError: polykernel\.Backend: name '' "
                             r"is not a valid backend name; use a non-empty "
                             r"Python identifier.*"),
    "emptied_name": ("plugin_objects:EMPTIED", r"its Backend is invalid: "
                     r"polykernel\.Backend: name '' is not a valid backend name; .*"),
    "builtin_name": ("plugin_objects:TAKEN", r"its backend name 'numba' is taken by "
                     r"a built-in backend"),
}  # fmt: skip


def _one_warning(record) -> str:
    ours = [w for w in record if issubclass(w.category, pk.PolykernelWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    return str(ours[0].message)


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_broken_entry_point_is_one_warning_and_is_skipped(entry_points, kind):
    value, cause = BROKEN[kind]
    entry_points(f"broken = {value}", GOOD)
    with pytest.warns(pk.PolykernelWarning) as record:
        names = backends.backend_names()
    message = _one_warning(record)
    assert re.search(
        rf"the backend plugin entry point 'broken = {re.escape(value)}' \(group "
        rf"'polykernel\.backends'\) is skipped: {cause}\. Fix the plugin", message
    ), message
    # The plugin listed after the broken one is in; nothing of the broken one is.
    assert "pk_plugin_good" in names and "broken" not in names and "" not in names
    assert backends.lookup("pk_plugin_good").summary == "a good plugin"
    assert backends.lookup("broken") is None
    (plugin,) = backends.broken_plugins()
    assert re.fullmatch(cause, plugin.cause)
    assert plugin.row() == ("broken", "-", False,
                            f"broken plugin, skipped: {plugin.cause}")  # fmt: skip
    assert plugin.row() in backends.info_rows(gpu=False)


def test_every_broken_entry_point_warns_once_and_every_good_one_loads(entry_points):
    good = ["good = plugin_objects:GOOD", "cls = plugin_objects:GoodClass",
            "factory = plugin_objects:good_factory"]  # fmt: skip
    broken = [f"{kind} = {value}" for kind, (value, _) in BROKEN.items()]
    entry_points(*broken[:5], good[0], *broken[5:10], good[1], *broken[10:], good[2])
    with pytest.warns(pk.PolykernelWarning) as record:
        names = backends.backend_names()
    warned = [str(w.message) for w in record]
    assert len(warned) == len(BROKEN)
    for kind in BROKEN:
        assert sum(f"entry point '{kind} = " in m for m in warned) == 1, kind
    assert {"pk_plugin_good", "pk_plugin_class", "pk_plugin_factory"} <= set(names)
    assert [p.name for p in backends.broken_plugins()] == list(BROKEN)
    # Read once: listing again warns no more.
    assert backends.backend_names() == names


def test_an_unrelated_call_works_beside_a_broken_plugin(entry_points):
    entry_points("broken = plugin_objects:NOT_A_BACKEND")
    op = pk.XLACustomKernel("test_plugin_isolation.unrelated")
    # A backend name nobody registered: its lowering asks the table for it.
    op.def_kernel("pk_unregistered_kind", "cpu", lambda outs, **kw: lambda x: [x * 2])
    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    with pytest.warns(pk.PolykernelWarning, match="entry point 'broken = "):
        out = op(jnp.ones(3, jnp.float32), outs=[spec])[0]
    np.testing.assert_allclose(out, 2 * np.ones(3))
    np.testing.assert_allclose(op(jnp.ones(3, jnp.float32), outs=[spec])[0], out)


def test_a_second_plugin_of_a_name_is_skipped_the_first_kept(entry_points):
    entry_points(GOOD, "again = plugin_objects:good_factory",
                 "twin = plugin_objects:GOOD")  # fmt: skip
    first = pk.Backend(name="pk_plugin_factory")
    pk.register_backend(first)
    with pytest.warns(pk.PolykernelWarning, match=r"entry point 'again = plugin_objects"
                      r":good_factory'.*its backend name 'pk_plugin_factory' is "
                      r"taken by Backend\(name='pk_plugin_factory'"):  # fmt: skip
        backends.all_backends()
    assert backends.lookup("pk_plugin_factory") is first
    # The same object under two entry points is one backend, not a conflict.
    assert backends.lookup("pk_plugin_good").summary == "a good plugin"


def test_unreadable_entry_point_metadata_is_one_warning(entry_points, monkeypatch):
    def unreadable(**selection):
        raise OSError("metadata is corrupt")

    monkeypatch.setattr("importlib.metadata.entry_points", unreadable)
    monkeypatch.setattr(backends, "_entry_points_read", False)
    with pytest.warns(pk.PolykernelWarning, match=r"reading the entry points failed "
                      r"\(OSError: metadata is corrupt\)"):  # fmt: skip
        names = backends.backend_names()
    assert "numba" in names and "jax_raw" in names


PROBE = """
import json
import jax, jax.numpy as jnp
import polykernel as pk

op = pk.XLACustomKernel("probe.unrelated")
op.def_kernel("pk_unregistered_kind", "cpu", lambda outs, **kw: lambda x: [x + 1])
out = op(jnp.zeros(2, jnp.float32), outs=[jax.ShapeDtypeStruct((2,), jnp.float32)])
print(json.dumps({"names": pk.backends.backend_names(),
                  "out": [float(v) for v in out[0]]}))
"""


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_installed_broken_plugins_leave_polykernel_info_and_calls_working(
    tmp_path, run_env, distribution
):
    lines = [f"{kind} = {value}" for kind, (value, _) in BROKEN.items()] + [GOOD]
    site = distribution(
        tmp_path / "site", lines,
        ["plugin_objects", "plugin_import_error", "plugin_empty_name"],
    )  # fmt: skip
    env = {**run_env, "PYTHONPATH": f"{site}:{run_env.get('PYTHONPATH', '')}"}
    # Each a process of its own, forked by the zygote (the plugins' distribution
    # is found on the child's own PYTHONPATH, when polykernel looks for plugins).
    cli = ["-m", "polykernel.cli", "info"]
    info = zygote.run([*cli, "--json"], env=env, timeout=120)
    assert info.returncode == 0, info.stderr
    rows = {r["backend"]: r for r in json.loads(info.stdout)["backends"]}
    assert rows["pk_plugin_good"]["usable"] is True
    for kind, (value, cause) in BROKEN.items():
        assert rows[kind]["platform"] == "-" and rows[kind]["usable"] is False
        assert re.fullmatch(f"broken plugin, skipped: {cause}", rows[kind]["detail"])
        assert info.stderr.count(f"entry point '{kind} = {value}' of distribution "
                                 f"'pk-test-plugins'") == 1, kind  # fmt: skip
    text = zygote.run(cli, env=env, timeout=120)
    assert text.returncode == 0, text.stderr
    shown = r"string\s+-\s+no\s+broken plugin, skipped: it is str 'numba'"
    assert re.search(shown, text.stdout), text.stdout
    probe = zygote.run(["-c", PROBE], env=env, timeout=120)
    assert probe.returncode == 0, probe.stderr
    report = json.loads(probe.stdout.strip().splitlines()[-1])
    assert report["out"] == [1.0, 1.0] and "pk_plugin_good" in report["names"]
