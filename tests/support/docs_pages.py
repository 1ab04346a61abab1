"""Running the Python blocks of a Markdown page as the docs tests do, and a sample
page that shows every convention of ``markdown_blocks.py``.

Each block runs on its own in a fresh process (``docs_block_runner.py``, forked by
``zygote.py`` with JAX, NumPy, Numba and polykernel imported) and an empty directory
of its own, after the page's setup block when marked so; its printed output is
compared with the ``text`` block shown after it. Used by
``tests/docs/test_docs_code.py`` (the real pages) and ``test_docs_runner.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import subprocess
from pathlib import Path

import pytest
from markdown_blocks import CodeBlock, code_blocks, normalise_output
from subprocess_support import SUPPORT
from zygote import run_script

RUNNER = SUPPORT / "docs_block_runner.py"
TAIL = 4000


def run_page(page: Path, label: str, env: dict[str, str], workdir: Path) -> int:
    """Run each block of the page in a fresh process of its own (after the page's
    setup block when marked so); assert each; return how many ran."""
    blocks = code_blocks(page.read_text())
    setup = next((b for b in blocks if b.setup), None)
    ran = 0
    for block in blocks:
        if block.skip_reason is not None:
            continue
        plan = [setup, block] if block.after_setup and setup else [block]
        run_one(page, label, plan, env, workdir / f"block{block.number}")
        ran += 1
    return ran


def run_one(
    page: Path, label: str, plan: list[CodeBlock], env: dict[str, str], workdir: Path
) -> None:
    """Run ``plan`` (a block, or the setup block and a block) in one process."""
    proc, events = _run_blocks(page, plan, env, workdir)
    ended = {e["number"]: e for e in events if e["event"] == "end"}
    started = {e["number"] for e in events if e["event"] == "start"}
    block = plan[-1]
    for ran in plan:
        where = f"{label}: {ran.where}"
        if ran is not block:
            where += f" (the setup block, run before {block.where})"
        if ran.number not in ended:
            what = "crashed the process" if ran.number in started else "never ran"
            raise AssertionError(
                f"{where} {what} (exit {proc.returncode})\n"
                f"--- stderr (tail) ---\n{proc.stderr[-TAIL:]}"
            )
        # The setup block's output is asserted where it runs on its own.
        _check_result(where, ran if ran is block else dataclasses.replace(
            ran, expected=None), ended[ran.number])  # fmt: skip
    assert proc.returncode == 0, (
        f"{label}: {block.where}: exit {proc.returncode}\n{proc.stderr[-TAIL:]}"
    )


def _run_blocks(
    page: Path, blocks: list[CodeBlock], env: dict[str, str], workdir: Path
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    cwd, plan, results = workdir / "cwd", workdir / "plan.json", workdir / "out.jsonl"
    cwd.mkdir(parents=True)  # an empty directory of its own per process
    units = [
        {"number": b.number, "units": [dataclasses.asdict(u) for u in b.units]}
        for b in blocks
    ]
    plan.write_text(json.dumps({"page": str(page.resolve()), "blocks": units}))
    proc = run_script(  # a fresh process forked by the zygote (zygote.py)
        RUNNER,
        str(plan),
        str(results),
        cwd=cwd,  # an empty directory the blocks may write in
        env={**env, "JAX_PLATFORMS": "cpu"},  # CPU, also under make test-gpu
        timeout=600,
    )
    lines = results.read_text().splitlines() if results.exists() else []
    return proc, [json.loads(line) for line in lines]


def _check_result(where: str, block: CodeBlock, result: dict) -> None:
    if result["error"] is not None:
        stderr = result["stderr"][-TAIL:]
        raise AssertionError(
            f"{where} raised:\n{result['error'][-TAIL:]}"
            + (f"--- the block's stderr (tail) ---\n{stderr}" if stderr else "")
        )
    if block.expected is None:
        return
    got, want = normalise_output(result["stdout"]), normalise_output(block.expected)
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(), got.splitlines(), "shown", "printed", lineterm=""
        )
        raise AssertionError(
            f"{where}: stdout differs from the output shown at line "
            f"{block.expected_line}:\n" + "\n".join(diff)
        )


def skip_block(page: Path, label: str, block: CodeBlock) -> None:
    """Compile a block marked skip (it must still be Python), then skip with its
    page, number, line and reason."""
    for unit in block.units:
        compile("\n" * (unit.line - 1) + unit.source, str(page), unit.mode)
    pytest.skip(f"{label} {block.where}: {block.skip_reason}")


# A synthetic page with every convention: a setup block, blocks after it, a skip,
# an output block, prose between, a block in a list, a pycon session and a block
# inside another fence.
FENCE = "```"
SAMPLE = f"""# Sample

{FENCE}bash
make test
{FENCE}

<!-- docs-test: setup -->
{FENCE}python
print(x := 20)
{FENCE}

{FENCE}text
20
{FENCE}

<!-- docs-test: after setup -->
{FENCE}py title="no output shown: prose in between"
print(x)
{FENCE}

Some prose.

{FENCE}text
not an output
{FENCE}

<!-- docs-test: skip (needs a GPU (CUDA)) -->
{FENCE}python
raise SystemExit(3)
{FENCE}

1. In a list:

    <!-- docs-test: after setup -->
    {FENCE}python
    def f():
        return x + 1
    {FENCE}

{FENCE}pycon
>>> for i in range(2):
...     print(i)
0
1
>>> x = 20
>>> x + 1
21
{FENCE}

````markdown
{FENCE}python
not run: inside another fence
{FENCE}
````
"""
