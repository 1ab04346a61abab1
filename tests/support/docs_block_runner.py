"""Runs Python blocks of one Markdown page in this process, in order.

``python docs_block_runner.py PLAN RESULTS``: PLAN is a JSON file
``{"page": path, "blocks": [{"number", "units": [{"line", "source", "mode"}]}]}``
(see ``markdown_blocks.py``): one block, or the page's setup block and a block marked
``after setup``. RESULTS gets one JSON line when a block starts and one when it ends
(its stdout, stderr and traceback if it raised), so a crash still names the block.
The blocks of a plan share one ``__main__``-like namespace, as in a reader's session.
Each unit is compiled under the page's own path with its page line numbers, and the
page's text is put in ``linecache``, so tracebacks show the Markdown line and
``inspect.getsource`` (Triton, Warp) finds a kernel's source.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import linecache
import sys
import traceback
from pathlib import Path


class _Tee(io.TextIOBase):
    """Output kept per block that still reaches the process's stdout or stderr."""

    def __init__(self, *streams: io.TextIOBase) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for stream in self.streams:
            stream.write(s)
        return len(s)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # what reaches the descriptor is not kept per block
        return self.streams[-1].fileno()


def _register_source(page: str, blocks: list[dict]) -> None:
    lines = Path(page).read_text().splitlines()
    for block in blocks:
        for unit in block["units"]:
            source = unit["source"].splitlines()
            lines[unit["line"] - 1 : unit["line"] - 1 + len(source)] = source
    text = [line + "\n" for line in lines]
    # mtime None: linecache.checkcache keeps the entry (as for a loader's source).
    linecache.cache[page] = (sum(map(len, text)), None, text, page)


def main(plan_path: str, results_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    page, blocks = plan["page"], plan["blocks"]
    _register_source(page, blocks)
    sys.path[0] = ""  # like `python -c`: the working directory, not tests/
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    with open(results_path, "a") as results:

        def record(**entry: object) -> None:
            results.write(json.dumps(entry) + "\n")
            results.flush()

        for block in blocks:
            record(number=block["number"], event="start")
            out, err = io.StringIO(), io.StringIO()
            error = None
            with (
                contextlib.redirect_stdout(_Tee(out, sys.stdout)),
                contextlib.redirect_stderr(_Tee(err, sys.stderr)),
            ):
                try:
                    for unit in block["units"]:
                        padded = "\n" * (unit["line"] - 1) + unit["source"]
                        exec(compile(padded, page, unit["mode"]), namespace)
                except BaseException as exc:  # SystemExit too: a block must not exit
                    error = "".join(  # without this runner's own frame
                        traceback.format_exception(exc, exc, exc.__traceback__.tb_next)
                    )
                sys.stdout.flush()
                sys.stderr.flush()
            if error is not None:
                print(error, file=sys.stderr, flush=True)
            record(
                number=block["number"],
                event="end",
                stdout=out.getvalue(),
                stderr=err.getvalue(),
                error=error,
            )
            if error is not None:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
