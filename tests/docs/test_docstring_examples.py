"""Every docstring example of polykernel's source runs as written (issue 29, item 4).

One test per docstring holding ``>>>`` lines (id: doctest's name, e.g.
``polykernel.core.primitive.XLACustomKernel``), listed from the source
(``docstring_examples.py``) and run with ``doctest`` in one fresh process for the
whole package (``docstring_runner.py``, forked by the zygote as the docs pages'
blocks are; ``ELLIPSIS | NORMALIZE_WHITESPACE``), each docstring with empty globals
and in an empty directory of its own: an example that uses a name it does not import
fails with the ``NameError`` a reader copying it would get. The process gets the
session's environment (private caches) with ``JAX_PLATFORMS=cpu``, also under ``make
test-gpu``, and the session's ``PYTHONPATH`` after the source (a package installed
there is found).

A statement marked ``# doctest: +SKIP`` carries its reason, ``(needs WHAT: WHY)``
(``test_every_skipped_example_says_why``). An example importing an optional package
missing here (warp, triton) is skipped with the package's name — so is one of a
backend's module that imports its package for it (``polykernel.backends.warp.types``
calls ``import warp``; its examples do not) — one that builds CUDA code when nvcc is
missing with that; nothing else is.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from docstring_examples import SKIP_HELP, DocExample, docstring_examples
from subprocess_support import REPO, SUPPORT, imported, missing_optional
from zygote import run_script

from polykernel import backends

SRC = REPO / "src"
RUNNER = SUPPORT / "docstring_runner.py"
EXAMPLES = docstring_examples(SRC)
TAIL = 6000


def run_examples(
    modules: list[str], env: dict[str, str], workdir: Path, pythonpath: Path = SRC
) -> dict[str, dict]:
    """Run the modules' docstring examples in one process; results by name (a module
    that cannot be imported: ``{"error": ...}`` under the module's name)."""
    results = workdir / "results.jsonl"
    path = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    # A fresh process forked by the zygote (zygote.py), as the docs pages' blocks
    # run: no JAX backend started, NumPy, JAX, Numba and polykernel not imported
    # again (the docs tests' zygote of this worker: the same environment).
    proc = run_script(
        RUNNER,
        str(results),
        str(workdir / "cwd"),
        *modules,
        cwd=workdir,
        env={**env, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path},
        timeout=900,
    )
    found: dict[str, dict] = {}
    lines = results.read_text().splitlines() if results.exists() else []
    for entry in map(json.loads, lines):
        key = entry.get("name", entry.get("module"))
        found[key] = {**found.get(key, {}), **entry}
    crashed = [k for k, v in found.items() if v.get("event") == "start"]
    for name in crashed:  # the process died inside this docstring
        found[name]["report"] = (
            f"crashed the process (exit {proc.returncode})\n{proc.stderr[-TAIL:]}"
        )
    if proc.returncode != 0 and not crashed:
        raise AssertionError(f"the runner exited {proc.returncode}\n{proc.stderr}")
    return found


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    modules = list(dict.fromkeys(e.module for e in EXAMPLES))
    return run_examples(modules, dict(os.environ), tmp_path_factory.mktemp("doc"))


def _backend_needs(example: DocExample) -> tuple[str, ...]:
    """The packages of the built-in backend whose subpackage holds the example's
    module that the module imports (on the example's behalf)."""
    parts = example.module.split(".")
    if parts[:2] != ["polykernel", "backends"] or len(parts) < 3:
        return ()
    backend = backends.lookup(parts[2]) if parts[2] in backends.BUILTIN else None
    if backend is None:
        return ()
    uses = imported(example.path.read_text(encoding="utf-8"))
    return tuple(m for m in backend.modules if m in uses)


def _requirement_missing(example: DocExample) -> str | None:
    if missing := missing_optional(example.text, needs=_backend_needs(example)):
        return f"needs {', '.join(missing)}, not installed here"
    if "load_cuda_" in example.text and shutil.which("nvcc") is None:
        return "builds CUDA code: nvcc not found"
    return None


def _where(example: DocExample) -> str:
    return f"{example.path.relative_to(REPO)}:{example.line}"


@pytest.mark.slow  # real compilation (Numba, C++, nvcc, Warp), one child process
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_docstring_example_runs(example: DocExample, results: dict[str, dict]):
    if reason := _requirement_missing(example):
        pytest.skip(f"{example.name}: {reason}")
    if "error" in results.get(example.module, {}):
        raise AssertionError(
            f"{example.module} cannot be imported:\n{results[example.module]['error']}"
        )
    result = results.get(example.name)
    assert result is not None, (
        f"{_where(example)}: doctest did not find the examples of {example.name} "
        f"(a docstring doctest does not see: move its examples where it looks)"
    )
    assert result.get("event") == "end" and result["failed"] == 0, (
        f"{_where(example)}: the examples of {example.name} fail as written:\n"
        + result["report"][-TAIL:]
    )
    assert result["attempted"] > result["skipped"], f"{example.name}: all skipped"


@pytest.mark.slow
def test_doctest_finds_exactly_the_listed_examples(results: dict[str, dict]):
    """The runner's docstrings are the source's: none unlisted, none missed."""
    ran = {k for k, v in results.items() if "event" in v}
    listed = {e.name for e in EXAMPLES}
    assert ran == listed, {"ran, not listed": ran - listed, "missed": listed - ran}


def test_every_skipped_example_says_why():
    bad = [
        f"{e.path.relative_to(REPO)}:{line}: {source}"
        for e in EXAMPLES
        for line, source in e.skips_without_reason()
    ]
    assert not bad, f"+SKIP without a reason; write {SKIP_HELP}:\n" + "\n".join(bad)


def test_a_backends_examples_are_skipped_where_its_package_is_missing(monkeypatch):
    # A machine without warp-lang, simulated: the warp.types examples never import
    # warp themselves, yet they need it; warp_rows says whether it is installed.
    import subprocess_support

    monkeypatch.setattr(subprocess_support, "installed", lambda m: m != "warp")
    by_name = {e.name: e for e in EXAMPLES}
    for name in ("types.jaxtype_to_warptype", "types.jaxinfo_to_warpinfo",
                 "kernel.warp_kernel"):  # fmt: skip
        example = by_name[f"polykernel.backends.warp.{name}"]
        assert _requirement_missing(example) == "needs warp, not installed here"
    for name in ("polykernel.backends.warp.info.warp_rows",
                 "polykernel.backends.numba.kernel.numba_kernel",
                 "polykernel.core.primitive.XLACustomKernel"):  # fmt: skip
        assert _requirement_missing(by_name[name]) is None


def test_the_package_has_examples():
    assert len(EXAMPLES) > 100
    assert "polykernel.core.primitive.XLACustomKernel" in {e.name for e in EXAMPLES}


# -- the conventions themselves, on a synthetic package -------------------------------

PACKAGE = '''
"""A module.

>>> from docpkg.mod import twice
>>> twice(2)
4
"""
import os

SCALE = 2


def twice(x):
    """Twice ``x``.

    Example:
        >>> twice(3)  # uses the module's name without importing it
        6
    """
    return SCALE * x


class Thing:
    """Example:
        >>> import os
        >>> open("written.txt", "w").write("x") and os.listdir(".")
        ['written.txt']
    """

    @property
    def value(self):
        """>>> from docpkg.mod import Thing
        >>> Thing().value
        1
        """
        return 1

    def on_gpu(self):
        """>>> Thing().on_gpu()  # (needs a GPU: a CUDA device)  # doctest: +SKIP
        >>> Thing().on_gpu()  # doctest: +SKIP
        """

    if os.name:

        def conditional(self):
            """>>> 1 + 1
            2
            """


def _nested():
    def inner():
        """>>> not_found_by_doctest"""
'''


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, list[DocExample]]:
    src = tmp_path / "src"
    (src / "docpkg").mkdir(parents=True)
    (src / "docpkg" / "__init__.py").write_text("")
    (src / "docpkg" / "mod.py").write_text(PACKAGE)
    (src / "docpkg" / "__main__.py").write_text('""">>> never run"""\n')
    return src, docstring_examples(src, "docpkg")


def test_the_lister_finds_what_doctest_finds(synthetic):
    _, examples = synthetic
    assert [(e.name, e.line) for e in examples] == [
        ("docpkg.mod", 2),
        ("docpkg.mod.twice", 14),
        ("docpkg.mod.Thing", 24),
        ("docpkg.mod.Thing.value", 32),
        ("docpkg.mod.Thing.on_gpu", 39),
        ("docpkg.mod.Thing.conditional", 46),
    ]  # not __main__.py (importing it runs it), not a function's nested function
    assert examples[4].skips_without_reason() == [
        (40, "Thing().on_gpu()  # doctest: +SKIP")
    ]


def test_examples_run_with_empty_globals_each_in_its_own_directory(
    synthetic, run_env: dict[str, str], tmp_path: Path
):
    src, examples = synthetic
    # A package found only through the session's PYTHONPATH (as warp-lang from
    # PYTHONPATH=/tmp/site under make test-gpu) is importable by the examples.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitepkg.py").write_text("VALUE = 7\n")
    (src / "docpkg" / "site_user.py").write_text(
        '"""\n>>> import sitepkg\n>>> sitepkg.VALUE\n7\n"""\n'
    )
    path = os.pathsep.join(filter(None, [str(site), run_env.get("PYTHONPATH")]))
    run_env = {**run_env, "PYTHONPATH": path}
    found = run_examples(
        ["docpkg.mod", "docpkg.missing", "docpkg.site_user"], run_env, tmp_path, src
    )
    assert found.pop("docpkg.site_user")["failed"] == 0
    assert "No module named 'docpkg.missing'" in found["docpkg.missing"]["error"]
    assert {e.name for e in examples} == {k for k, v in found.items() if "event" in v}
    failed = {k: v["failed"] for k, v in found.items() if "event" in v}
    assert failed == {
        "docpkg.mod": 0,
        "docpkg.mod.twice": 1,  # NameError: the example does not import twice
        "docpkg.mod.Thing": 0,  # the directory was empty
        "docpkg.mod.Thing.value": 0,
        "docpkg.mod.Thing.on_gpu": 0,
        "docpkg.mod.Thing.conditional": 0,
    }
    assert (
        "NameError: name 'twice' is not defined" in found["docpkg.mod.twice"]["report"]
    )
    assert found["docpkg.mod.Thing.on_gpu"]["skipped"] == 2
