"""Turn ``.ci/gpu-check``'s ``env.txt`` into a ``machine.json`` like the demo's.

``python -m polykernel.demo`` writes ``machine.json`` beside ``results.json``
(:func:`polykernel.demo.machine_info`); GPU runs recorded before it did have only
the ``env.txt`` that ``.ci/gpu-check`` writes. This script reads that file and fills
the same fields (``cpu``, ``cores``, ``os``, ``python``, ``versions``, ``gpus``),
plus ``driver``, ``cuda``, ``date`` and ``source``; what ``env.txt`` does not
record is ``null``.

Run: ``python benchmarks/machine_from_env.py docs/data/gpu/env.txt
> docs/data/gpu/machine.json``
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

VERSIONS = ("polykernel", "jax", "jaxlib", "numpy", "numba", "scipy")
EXTRA = ("numba-cuda", "triton", "warp-lang", "jax-cuda13-plugin", "jax-cuda12-plugin")


def parse(text: str) -> dict[str, Any]:
    """The machine described by an ``env.txt``'s text."""
    lines = text.splitlines()
    pip: dict[str, str] = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s+(\d[^\s]*)", line.strip())
        if m:
            pip[m.group(1).lower()] = m.group(2)
        elif line.startswith("numpy "):  # "numpy X numba Y", printed by Python
            words = line.split()
            pip.update(zip(words[::2], words[1::2], strict=False))
    gpus = [m.group(1) for line in lines if (m := re.match(r"GPU \d+: (.+?) \(", line))]
    driver = None
    for i, line in enumerate(lines[:-1]):
        if line.startswith("name, driver_version"):
            driver = lines[i + 1].split(",")[1].strip()
    cuda = next(
        (m.group(1) for line in lines if (m := re.search(r"release ([\d.]+)", line))),
        None,
    )
    python = next(
        (m.group(1) for line in lines if (m := re.match(r"(\d+\.\d+\.\d+) \(", line))),
        None,
    )
    return {
        "cpu": None,
        "cores": None,
        "os": None,
        "python": python,
        "versions": {name: pip.get(name) for name in VERSIONS}
        | {name: pip[name] for name in EXTRA if name in pip},
        "gpus": gpus,
        "driver": driver,
        "cuda": cuda,
        "date": lines[0].strip() if lines else None,
        "source": "env.txt written by .ci/gpu-check",
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(parse(Path(argv[0]).read_text()), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
