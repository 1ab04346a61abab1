"""Every Python code block of README.md and docs/**/*.md runs (issue 21, item 5).

One test per page (id: its path from the repository root). The conventions are those
of ``markdown_blocks.py`` (issue 29, item 5): every ``python``/``py``/``pycon`` block
runs **on its own**, in a fresh process and an empty directory of its own
(``docs_block_runner.py``), so a block that uses a name or a file an earlier block
made fails, as the reader who copies it alone would; a page may share one setup block
(``<!-- docs-test: setup -->``), which then runs first in the process of each block
marked ``<!-- docs-test: after setup -->``. A ```` ```text ```` block right after a
block is its asserted stdout; ``<!-- docs-test: skip (REASON) -->`` on the line
before a fence skips that block (each skip is listed as a skipped
``test_docs_block_marked_skip`` case, with its page, line and reason).

The processes get the test session's environment (``run_env``: ``JAX_PLATFORMS=cpu``,
``NUMBA_THREADING_LAYER=omp``, every cache under the session's own directory) and
run in empty temporary directories, not the checkout: a block may write files there,
and may not rely on the repository's files, as a reader's copy would not either. A
page that imports an optional package missing here (warp, triton) is skipped with the
package's name.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_blocks import CodeBlock, MarkupError, code_blocks, normalise_output
from subprocess_support import REPO, SUPPORT, missing_optional

ROOT = REPO
RUNNER = SUPPORT / "docs_block_runner.py"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGE_IDS = [p.relative_to(ROOT).as_posix() for p in PAGES]
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
        _run_one(page, label, plan, env, workdir / f"block{block.number}")
        ran += 1
    return ran


def _run_one(
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
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(plan), str(results)],
        cwd=cwd,  # an empty directory the blocks may write in
        env={**env, "JAX_PLATFORMS": "cpu"},  # CPU, also under make test-gpu
        capture_output=True,
        text=True,
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


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
def test_docs_page_code_runs(page: Path, run_env: dict[str, str], tmp_path: Path):
    label = page.relative_to(ROOT).as_posix()
    blocks = code_blocks(page.read_text())  # a MarkupError fails the page
    code = "\n".join(b.code for b in blocks if b.skip_reason is None)
    if missing := missing_optional(code):
        pytest.skip(f"{label} needs {missing}, not installed here")
    assert run_page(page, label, run_env, tmp_path) == sum(
        b.skip_reason is None for b in blocks
    )


def _skipped_blocks() -> list:
    skipped = []
    for page, label in zip(PAGES, PAGE_IDS, strict=True):
        try:
            blocks = code_blocks(page.read_text())
        except MarkupError:
            continue  # test_docs_page_code_runs reports it
        skipped += [
            pytest.param(page, b, id=f"{label}:{b.line}")
            for b in blocks
            if b.skip_reason is not None
        ]
    # None marked: one case that checks the mechanism on a synthetic page instead
    # (a passing test, not a placeholder skip in the summary).
    return skipped or [pytest.param(None, None, id="none-marked")]


def skip_block(page: Path, label: str, block: CodeBlock) -> None:
    """Compile a block marked skip (it must still be Python), then skip with its
    page, number, line and reason."""
    for unit in block.units:
        compile("\n" * (unit.line - 1) + unit.source, str(page), unit.mode)
    pytest.skip(f"{label} {block.where}: {block.skip_reason}")


@pytest.mark.parametrize(("page", "block"), _skipped_blocks())
def test_docs_block_marked_skip(page: Path | None, block: CodeBlock | None):
    """One skipped case per block marked skip: ``-ra`` lists each with its reason.
    When no block is marked, the marker is checked on ``SAMPLE`` and the case
    passes."""
    if page is None or block is None:
        (marked,) = [b for b in code_blocks(SAMPLE) if b.skip_reason is not None]
        with pytest.raises(pytest.skip.Exception, match=r"needs a GPU \(CUDA\)"):
            skip_block(ROOT / "sample.md", "sample.md", marked)
        return
    skip_block(page, page.relative_to(ROOT).as_posix(), block)


# -- the conventions themselves, on synthetic pages -----------------------------------

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


def test_the_extractor_pins_the_conventions():
    blocks = code_blocks(SAMPLE)
    assert [(b.number, b.line, b.lang) for b in blocks] == [
        (1, 8, "python"),
        (2, 17, "py"),
        (3, 28, "python"),
        (4, 35, "python"),  # indented in a list: dedented
        (5, 40, "pycon"),
    ]  # bash, text and the block inside the ````markdown fence are not code
    assert [(b.expected, b.expected_line) for b in blocks] == [
        ("20", 12),
        (None, None),  # prose between the block and the text block
        (None, None),
        (None, None),
        ("0\n1\n21", 41),  # pycon: the lines without a prompt
    ]
    assert [b.skip_reason for b in blocks] == [None, None, "needs a GPU (CUDA)"] + [
        None
    ] * 2
    assert [(b.setup, b.after_setup) for b in blocks] == [
        (True, False),
        (False, True),
        (False, False),
        (False, True),  # a marker indented like its fence, in a list
        (False, False),  # no marker: on its own
    ]
    assert blocks[3].code == "def f():\n    return x + 1"
    assert [(u.line, u.mode, u.source) for u in blocks[4].units] == [
        (41, "single", "for i in range(2):\n    print(i)\n"),
        (45, "single", "x = 20\n"),
        (46, "single", "x + 1\n"),
    ]


def test_each_block_runs_on_its_own_or_after_the_setup_block(
    run_env: dict[str, str], tmp_path: Path
):
    shared = tmp_path / "shared"
    shared.mkdir()
    page = tmp_path / "page.md"
    page.write_text(
        SAMPLE.replace("print(x)", "import inspect, os\nprint(x)  ")
        + f"""
<!-- docs-test: after setup -->
{FENCE}python
import os
open("written.txt", "w").write("blocks may write files")
open({str(shared / "pid")!r}, "w").write(str(os.getpid()))
print(x + 1)
{FENCE}
{FENCE}text

21

{FENCE}

{FENCE}python
import os
pid = int(open({str(shared / "pid")!r}).read())
print(pid != os.getpid(), os.listdir("."), "x" in globals())
{FENCE}
{FENCE}text
True [] False
{FENCE}
"""
    )
    # The skipped block would exit with status 3; every other one runs in a process
    # and a directory of its own, after the setup block when marked so.
    assert run_page(page, "page.md", run_env, tmp_path / "run") == 6
    assert (tmp_path / "run" / "block6" / "cwd" / "written.txt").exists()
    assert not (tmp_path / "run" / "block7" / "cwd" / "written.txt").exists()


def test_a_block_using_an_earlier_blocks_names_fails_unless_after_setup(
    run_env: dict[str, str], tmp_path: Path
):
    first = f"{FENCE}python\nimport math\nx = 16\n{FENCE}\n\n"
    second = f"{FENCE}python\nprint(math.sqrt(x))\n{FENCE}\n{FENCE}text\n4.0\n{FENCE}\n"
    page = tmp_path / "page.md"
    page.write_text(first + second)  # what hid the sharding guide's missing imports
    with pytest.raises(
        AssertionError, match=r"block 2 \(line 6\) raised:(.|\n)*NameError"
    ):
        run_page(page, "page.md", run_env, tmp_path / "run")
    page.write_text(
        f"<!-- docs-test: setup -->\n{first}<!-- docs-test: after setup -->\n{second}"
    )
    assert run_page(page, "page.md", run_env, tmp_path / "run2") == 2


def test_a_failing_setup_block_is_named_for_the_block_it_prepares(
    run_env: dict[str, str], tmp_path: Path
):
    page = tmp_path / "page.md"
    page.write_text(
        f"<!-- docs-test: setup -->\n{FENCE}python\nraise RuntimeError('broke')\n"
        f"{FENCE}\n\n<!-- docs-test: after setup -->\n{FENCE}python\nprint(1)\n"
        f"{FENCE}\n"
    )
    setup, block = code_blocks(page.read_text())
    with pytest.raises(
        AssertionError,
        match=r"^page\.md: block 1 \(line 2\) \(the setup block, run before block 2 "
        r"\(line 7\)\) raised:(.|\n)*RuntimeError: broke",
    ):
        _run_one(page, "page.md", [setup, block], run_env, tmp_path / "run")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"<!-- docs-test: setup -->\n{FENCE}python\npass\n{FENCE}\n"
            f"<!-- docs-test: setup -->\n{FENCE}python\npass\n{FENCE}\n",
            r"line 5: a second docs-test setup block",
        ),
        (
            f"<!-- docs-test: after setup -->\n{FENCE}python\npass\n{FENCE}\n"
            f"<!-- docs-test: setup -->\n{FENCE}python\npass\n{FENCE}\n",
            r"line 1: a block marked 'after setup' needs the page's setup block",
        ),
        (
            f"<!-- docs-test: setup -->\n{FENCE}bash\nls\n{FENCE}\n",
            r"line 1: .*right before the opening fence",
        ),
    ],
    ids=["two-setups", "after-before-setup", "setup-on-bash"],
)
def test_a_bad_setup_marker_is_an_error(text: str, message: str):
    with pytest.raises(MarkupError, match=message):
        code_blocks(text)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            'print("21")',
            r"page\.md: block 2 \(line 6\): stdout differs from the output "
            r"shown at line 10:\n--- shown\n\+\+\+ printed\n@@ .* @@\n-20\n\+21",
        ),
        (
            "y = 1 / 0",
            r"page\.md: block 2 \(line 6\) raised:\n(.|\n)*page\.md\", "
            r"line 7, in <module>\n    y = 1 / 0\n(.|\n)*ZeroDivisionError",
        ),
        (
            "import os\nos._exit(9)",
            r"page\.md: block 2 \(line 6\) crashed the "
            r"process \(exit 9\)",
        ),
    ],
    ids=["wrong-output", "exception", "crash"],
)
def test_a_failing_block_names_the_page_block_and_line(
    code: str, message: str, run_env: dict[str, str], tmp_path: Path
):
    page = tmp_path / "page.md"
    page.write_text(
        f"{FENCE}python\nx = 20\n{FENCE}\n\n"
        f"<!-- next: block 2 -->\n{FENCE}python\n{code}\n{FENCE}\n\n"
        f"{FENCE}text\n20\n{FENCE}\n"
    )
    with pytest.raises(AssertionError, match=message):
        run_page(page, "page.md", run_env, tmp_path / "run")


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- docs-test: skip -->", "not a valid docs-test marker"),
        ("<!-- docs-test: skip ( ) -->", "not a valid docs-test marker"),
        ("<!-- docs-test: skp (typo) -->", "not a valid docs-test marker"),
        ("<!-- docs-test: skip (ok) -->\n", "must be on the line right before"),
    ],
    ids=["no-reason", "blank-reason", "unknown", "not-before-the-fence"],
)
def test_a_bad_skip_marker_is_an_error(marker: str, message: str):
    with pytest.raises(MarkupError, match=f"line 2: .*{message}"):
        code_blocks(f"Text\n{marker}\n{FENCE}python\npass\n{FENCE}\n")


def test_a_skip_marker_before_a_non_python_block_is_an_error():
    with pytest.raises(MarkupError, match=r"line 1: .*right before the opening fence"):
        code_blocks(f"<!-- docs-test: skip (why) -->\n{FENCE}bash\nls\n{FENCE}\n")


def test_an_unclosed_fence_is_an_error():
    with pytest.raises(MarkupError, match="line 2: fence ``` is never closed"):
        code_blocks(f"Text\n{FENCE}python\npass\n")


def test_missing_optional_reads_every_imported_name():
    source = "import jax, not_installed_a as a\nfrom not_installed_b.sub import c\n"
    optional = ("not_installed_a", "not_installed_b", "jax", "not_imported")
    assert missing_optional(source, optional) == ["not_installed_a", "not_installed_b"]


def test_a_block_marked_skip_is_compiled_and_reported(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(SAMPLE.replace("raise SystemExit(3)", "run_on_gpu(x"))
    marked = code_blocks(page.read_text())[2]
    with pytest.raises(SyntaxError) as err:
        skip_block(page, "page.md", marked)
    assert (err.value.filename, err.value.lineno) == (str(page), 29)
    with pytest.raises(pytest.skip.Exception, match=r"^page\.md block 3 \(line 28\): "):
        skip_block(page, "page.md", code_blocks(SAMPLE)[2])
