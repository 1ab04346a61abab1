"""Runs the docstring examples of some modules with ``doctest``, in this process.

``python docstring_runner.py RESULTS WORKDIR MODULE...``: for each module, imports
it and runs every docstring example ``doctest`` finds in it, each with empty globals
(an example imports what it uses) and in a fresh directory under WORKDIR. RESULTS
gets one JSON line per module that cannot be imported (``{"module", "error"}``),
one when a docstring starts (``{"name", "event": "start"}``, so a crash still names
it) and one when it ends: ``{"name", "event": "end", "file", "line", "attempted",
"failed", "skipped", "report"}`` (``report``: doctest's account of the failures).
The option flags are ``docstring_examples.OPTIONFLAGS``.
"""

from __future__ import annotations

import doctest
import importlib
import io
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docstring_examples import OPTIONFLAGS


def run_module(module: str, workdir: Path, record) -> None:
    try:
        mod = importlib.import_module(module)
    except BaseException as exc:  # an optional package missing, or a real error
        record(module=module, error="".join(traceback.format_exception_only(exc)))
        return
    finder = doctest.DocTestFinder(exclude_empty=True)
    for test in finder.find(mod, module, globs={"__name__": "__main__"}):
        if not test.examples:
            continue
        record(name=test.name, event="start")
        cwd = workdir / test.name
        cwd.mkdir(parents=True)
        os.chdir(cwd)
        out = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS, verbose=False)
        try:
            result = runner.run(test, out=out.write, clear_globs=True)
        finally:
            os.chdir(workdir)
        skipped = sum(bool(ex.options.get(doctest.SKIP)) for ex in test.examples)
        record(
            name=test.name,
            event="end",
            file=test.filename,
            line=None if test.lineno is None else test.lineno + 1,
            attempted=result.attempted,
            failed=result.failed,
            skipped=skipped,
            report=out.getvalue(),
        )


def main(results_path: str, workdir: str, modules: list[str]) -> int:
    root = Path(workdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    with open(results_path, "a") as results:

        def record(**entry: object) -> None:
            results.write(json.dumps(entry) + "\n")
            results.flush()

        for module in modules:
            run_module(module, root, record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
