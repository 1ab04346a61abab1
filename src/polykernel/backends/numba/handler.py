"""A loaded Numba handler: the record :mod:`.build` keeps per target name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ffi.artefact import Artefact

__all__ = ["Handler"]


@dataclass
class Handler:
    """A loaded handler: its entry address, owner and how it was obtained."""

    target: str
    address: int
    library: Any
    # "disk" (cache hit), "built" (and cached), "unpublished" (the cache could not
    # be written), "uncached" (its code depends on this process)
    origin: str
    label: str = ""
    # No content fingerprint: the target name holds a per-process token.
    process_local: bool = False
    # The shared object it was loaded from (None: in Numba's JIT).
    artefact: Artefact | None = None
