"""How the docs tests run a page's blocks, on synthetic pages: each on its own or
after the setup block, and failures named by page, block and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_pages import FENCE, SAMPLE, run_one, run_page, skip_block
from markdown_blocks import code_blocks


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
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
        run_one(page, "page.md", [setup, block], run_env, tmp_path / "run")


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


def test_a_block_marked_skip_is_compiled_and_reported(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(SAMPLE.replace("raise SystemExit(3)", "run_on_gpu(x"))
    marked = code_blocks(page.read_text())[2]
    with pytest.raises(SyntaxError) as err:
        skip_block(page, "page.md", marked)
    assert (err.value.filename, err.value.lineno) == (str(page), 29)
    with pytest.raises(pytest.skip.Exception, match=r"^page\.md block 3 \(line 28\): "):
        skip_block(page, "page.md", code_blocks(SAMPLE)[2])
