"""The job's key-value store, as the agreement and the distributed tuner use it.

Under ``jax.distributed`` every process holds a client of the coordination
service's key-value store (JAX's own: no other service). This module is the one
place that talks to it, in four verbs:

- :meth:`JobStore.put` — write a key (overwriting: progress, heartbeats);
- :meth:`JobStore.claim` — write a key only if nobody has: the first writer wins
  and every later one reads what it wrote. A decision that every process must
  share is *claimed*, so the processes cannot end up following different ones;
- :meth:`JobStore.wait` — read a key, waiting until a deadline, while a ``alive``
  check may give up early (a peer that stopped beating);
- :meth:`JobStore.peek` — read a key without waiting.

A store that fails in any other way (the coordinator gone) raises
:class:`StoreGone`: the caller falls back, and says so.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable
from typing import Any

__all__ = ["PREFIX", "JobStore", "StoreGone", "component"]

#: Every key polykernel writes starts with this (the store is shared with JAX).
PREFIX = "polykernel/"
#: A wait polls in slices of at most this long (between them, ``alive`` is asked).
SLICE_S = 0.5


class StoreGone(Exception):
    """The job's key-value store failed (not a missing key, not a timeout)."""


def component(name: str) -> str:
    """``name`` as one path component of a key (no ``/`` left in it)."""
    return urllib.parse.quote(name, safe="._-")


def _code(err: BaseException) -> str:
    """The status code a store error starts with (``NOT_FOUND``, ...)."""
    return str(err).split(":", 1)[0].strip()


class JobStore:
    """The key-value store of this process's job (``client`` from
    ``_jax_compat.distributed_job``)."""

    def __init__(self, client: Any, index: int, count: int) -> None:
        self.client, self.index, self.count = client, index, count

    def put(self, key: str, value: str) -> None:
        """Write ``key`` (replacing what is there)."""
        try:
            self.client.key_value_set(PREFIX + key, value, allow_overwrite=True)
        except Exception as err:
            raise StoreGone(f"writing {key}: {err}") from None

    def claim(self, key: str, value: str) -> str:
        """Write ``key`` unless it is written; return what it holds now (``value``
        when this process was first)."""
        try:
            self.client.key_value_set(PREFIX + key, value, allow_overwrite=False)
            return value
        except Exception as err:
            if _code(err) != "ALREADY_EXISTS":
                raise StoreGone(f"claiming {key}: {err}") from None
        found = self.peek(key)
        if found is None:  # written, then deleted: nobody deletes our keys
            raise StoreGone(f"claiming {key}: it vanished")
        return found

    def peek(self, key: str) -> str | None:
        """What ``key`` holds, or None when it is not written yet."""
        try:
            return str(self.client.key_value_try_get(PREFIX + key))
        except Exception as err:
            if _code(err) == "NOT_FOUND":
                return None
            raise StoreGone(f"reading {key}: {err}") from None

    def wait(
        self,
        key: str,
        deadline: float,
        alive: Callable[[], str | None] = lambda: None,
    ) -> tuple[str | None, str]:
        """``(value, "")`` once ``key`` is written; ``(None, why)`` when the
        monotonic ``deadline`` passes first, or ``alive()`` returns why to stop
        waiting (a peer that stopped beating)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "nothing came in time"
            step = max(1, int(min(left, SLICE_S) * 1000))
            try:
                value = self.client.blocking_key_value_get(PREFIX + key, step)
                return str(value), ""
            except Exception as err:
                if _code(err) not in ("DEADLINE_EXCEEDED", "NOT_FOUND"):
                    raise StoreGone(f"waiting for {key}: {err}") from None
            why = alive()
            if why is not None:
                found = self.peek(key)  # written just before it stopped
                return (found, "") if found is not None else (None, why)


#: A value longer than this is stored in chunks (the store's messages are bounded).
CHUNK = 256 * 1024


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:32]


def put_blob(store: JobStore, key: str, text: str) -> str:
    """Store ``text`` (any length) under content-addressed chunks and return the
    reference to it (``blob:<digest>:<chunks>``) to put or claim under a key."""
    digest = _digest(text)
    chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
    for i, chunk in enumerate(chunks):
        store.put(f"{key}.blob/{digest}/{i}", chunk)
    return f"blob:{digest}:{len(chunks)}"


def get_blob(store: JobStore, key: str, ref: str, deadline: float) -> str | None:
    """The text a :func:`put_blob` reference names (None: a chunk never came, or
    the text is not what its digest says)."""
    try:
        _, digest, count = ref.split(":")
        n = int(count)
    except ValueError:
        return None
    parts = []
    for i in range(n):
        chunk, _ = store.wait(f"{key}.blob/{digest}/{i}", deadline)
        if chunk is None:
            return None
        parts.append(chunk)
    text = "".join(parts)
    return text if _digest(text) == digest else None
