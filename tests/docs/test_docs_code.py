"""Every Python code block of README.md and docs/**/*.md runs (issue 21, item 5).

One test per page (id: its path from the repository root). The conventions are those
of ``markdown_blocks.py`` (issue 29, item 5): every ``python``/``py``/``pycon`` block
runs **on its own**, in a fresh process and an empty directory of its own
(``docs_block_runner.py``, forked by ``zygote.py`` from a process that imported JAX,
NumPy, Numba and polykernel and started nothing), so a block that uses a name or a
file an earlier block made fails, as the reader who copies it alone would; a page may
share one setup block (``<!-- docs-test: setup -->``), which then runs first in the
process of each block marked ``<!-- docs-test: after setup -->``. A ```` ```text ````
block right after a block is its asserted stdout; ``<!-- docs-test: skip (REASON)
-->`` on the line before a fence skips that block (each skip is listed as a skipped
``test_docs_block_marked_skip`` case, with its page, line and reason).

The processes get the test session's environment (``run_env``: ``JAX_PLATFORMS=cpu``,
``NUMBA_THREADING_LAYER=omp``, every cache under the session's own directory) and
run in empty temporary directories, not the checkout: a block may write files there,
and may not rely on the repository's files, as a reader's copy would not either. A
page that imports an optional package missing here (warp, triton) is skipped with the
package's name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_pages import SAMPLE, run_page, skip_block
from markdown_blocks import CodeBlock, MarkupError, code_blocks
from subprocess_support import REPO, missing_optional

ROOT = REPO
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGE_IDS = [p.relative_to(ROOT).as_posix() for p in PAGES]


@pytest.mark.parametrize("page", PAGES, ids=PAGE_IDS)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
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
