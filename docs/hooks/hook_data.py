"""What the docs hooks share: where the data files are, reading them, PNG bytes.

The hooks (``results.py``, ``tuning.py``) import this module beside them (MkDocs puts
a hook's folder on ``sys.path`` while it loads the hook). ``on_config`` of each hook
calls :func:`set_docs_dir` before any page is built.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_data_dir: Path | None = None


def set_docs_dir(docs_dir: str | Path) -> None:
    """The data files are under ``docs_dir/data``."""
    global _data_dir
    _data_dir = Path(docs_dir) / "data"


def load_json(name: str, hook: str = "results") -> Any:
    """The JSON file ``data/<name>``; a missing or broken file fails the build."""
    if _data_dir is None:
        raise PluginError(f"{hook} hook: on_config has not run (no data directory)")
    path = _data_dir / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PluginError(f"{hook} hook: cannot read {path}: {err}") from err


def png_bytes(fig: Any) -> bytes:
    """``fig`` as PNG bytes, closed; reproducible (no timestamp, no software tag)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()
