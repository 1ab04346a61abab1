"""The one "signature -> target" memo of a kernel (``BackendKernel.built``).

A backend that builds per call signature (Numba's handler per dtypes/ranks/attribute
types, Warp's per shapes and platform) keeps what it built here, keyed by what it
says identifies a build. The memo is bounded (a kernel called with ever-new shapes
must not grow without limit: the oldest entry goes, and a later call of it asks the
backend again, whose own registry or cache makes that cheap) and thread-safe (XLA
and user threads lower concurrently). Two threads missing the same key may both
build; the first result is kept, so every caller sees one target per key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["BuildMemo"]


class BuildMemo:
    """A bounded, thread-safe ``key -> built`` mapping with least-recent eviction.

    Example:
        >>> from polykernel.contract.memo import BuildMemo
        >>> memo = BuildMemo(limit=2)
        >>> memo.get_or_build("a", lambda: 1), memo.get_or_build("a", lambda: 2)
        (1, 1)
    """

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """What was built for ``key``, building it (outside the lock) if absent."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        built = build()  # may take seconds: other keys must not wait for it
        with self._lock:
            if key not in self._items:
                self._items[key] = built
                while len(self._items) > self.limit:
                    self._items.popitem(last=False)
            return self._items[key]

    def values(self) -> list[Any]:
        """What is held now, oldest first."""
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)
