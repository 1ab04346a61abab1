"""The conventions of ``markdown_blocks.py`` on synthetic pages: which blocks are
code, their outputs and markers, and the markup it refuses."""

from __future__ import annotations

import pytest
from docs_pages import FENCE, SAMPLE
from markdown_blocks import MarkupError, code_blocks
from subprocess_support import missing_optional


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
