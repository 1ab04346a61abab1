"""Warp CPU builds in polykernel's cache: what a process needs to register a target.

Section ``warp`` holds two kinds of entries, each with what the handler was built
from (the target name's parts, Warp's version, the entry symbol, the parameter
plan, the call signature and the launch grid):

- ``<target>``: a copy of the object file Warp built for the kernel's module
  (:func:`save`, :func:`read`), from which a handler can be built again;
- ``<target>-<env>``: the handler linked with that object into one shared object
  (:func:`save_linked`, :func:`read_linked`), with the requirements of the machine
  and jaxlib it was built for (``env`` digests those that must match exactly:
  :func:`polykernel.backends.warp.linked.key`); loading it needs neither Warp nor
  llvmlite.

Entries are published and verified by :mod:`polykernel.cache.entries`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ...cache.entries import (
    DAMAGED,
    entry_fault,
    entry_path,
    publish_entry,
    read_entry,
)
from ...ffi.handler_ir.signature import Signature
from .plan import ArgPlan, KernelPlan

__all__ = [
    "LIBRARY",
    "OBJECT",
    "SECTION",
    "Saved",
    "object_bytes",
    "read",
    "read_linked",
    "save",
    "save_linked",
]

#: The cache section holding Warp CPU objects.
SECTION = "warp"
#: The object file's name in an entry.
OBJECT = "module.o"
#: The linked handler's name in an entry.
LIBRARY = "handler.so"
log = logging.getLogger(__name__)


def _plan_json(plan: KernelPlan) -> dict[str, Any]:
    return {
        "key": plan.key,
        "launch_ndim": plan.launch_ndim,
        "args": [
            [a.label, a.kind, a.dtype, a.ndim, a.offset, a.size] for a in plan.args
        ],
    }


def _plan(data: dict[str, Any]) -> KernelPlan:
    args = tuple(
        ArgPlan(str(label), str(kind), str(dtype), int(ndim), int(at), int(size))
        for label, kind, dtype, ndim, at, size in data["args"]
    )
    return KernelPlan(str(data["key"]), args, int(data["launch_ndim"]))


def _sig_json(sig: Signature) -> dict[str, Any]:
    return {
        "ins": [list(x) for x in sig.ins],
        "outs": [list(x) for x in sig.outs],
        "attrs": [list(x) for x in sig.attrs],
        "half": sig.half,
        "aliases": [list(x) for x in sig.aliases],
    }


def _sig(data: dict[str, Any]) -> Signature:
    def pairs(key: str, cast: Any) -> tuple[tuple[Any, Any], ...]:
        return tuple((str(a), cast(b)) for a, b in data[key])

    return Signature(
        pairs("ins", int),
        pairs("outs", int),
        pairs("attrs", str),
        half=str(data["half"]),
        aliases=tuple((int(i), int(o)) for i, o in data["aliases"]),
    )


def object_bytes(module_exec: Any) -> bytes:
    """The object file Warp built for ``module_exec`` (empty when unreadable)."""
    path = getattr(module_exec, "binary_path", None)
    try:
        return Path(path).read_bytes() if path else b""
    except OSError as err:
        log.debug("warp: cannot read Warp's CPU object %s: %s", path, err)
        return b""


def _meta(target: str, parts: dict[str, Any]) -> dict[str, Any]:
    launch = parts["launch"]
    return {
        "target": target,
        "digest": parts["digest"],
        "name": parts["name"],
        "launch": list(launch) if isinstance(launch, tuple) else launch,
        "entry": parts["entry"],
        "label": parts["label"],
        "plan": _plan_json(parts["plan"]),
        "sig": _sig_json(parts["sig"]),
        "warp": parts["warp"],
    }


def save(target: str, parts: dict[str, Any], data: bytes) -> bool:
    """Keep Warp's object ``data`` for ``target`` (best effort).

    ``parts`` holds the target name's parts (``digest``, ``name``, ``launch``,
    ``warp``: Warp's version), ``entry`` (the symbol), ``plan``, ``sig`` and
    ``label``.
    """
    if (entry_path(SECTION, target) / "meta.json").exists():
        return True
    if not data:
        return False
    return (
        publish_entry(SECTION, target, {OBJECT: data}, _meta(target, parts)) is not None
    )


def save_linked(
    key: str, target: str, parts: dict[str, Any], library: bytes, requires: Any
) -> Path | None:
    """Publish the linked handler of ``target`` as entry ``key``; its folder, or None
    when the cache cannot be written. ``requires``: its
    :class:`~polykernel.ffi.artefact.Requirements`."""
    meta = {
        **_meta(target, parts),
        "symbol": target,
        "requires": _requires_json(requires),
    }
    return publish_entry(SECTION, key, {LIBRARY: library}, meta)


def _requires_json(requires: Any) -> dict[str, Any]:
    return requires.to_json()


class Saved:
    """What :func:`save` or :func:`save_linked` kept for one target, read back."""

    def __init__(self, data: bytes, meta: dict[str, Any], path: Path,
                 readonly: bool) -> None:  # fmt: skip
        self.object = data  # Warp's object, or the linked handler
        self.meta = meta
        self.path = path  # the entry's folder
        self.readonly = readonly
        self.target = str(meta["target"])
        self.digest = str(meta["digest"])
        self.name = str(meta["name"])
        launch = meta["launch"]
        self.launch = tuple(launch) if isinstance(launch, list) else int(launch)
        self.entry = str(meta["entry"])
        self.label = str(meta["label"])
        self.plan = _plan(meta["plan"])
        self.sig = _sig(meta["sig"])
        self.warp = str(meta["warp"])

    def parts(self) -> dict[str, Any]:
        """The ``parts`` :func:`save` was given."""
        keys = ("digest", "name", "launch", "entry", "label", "plan", "sig", "warp")
        return {k: getattr(self, k) for k in keys}

    def requires(self) -> Any:
        """The linked handler's :class:`~polykernel.ffi.artefact.Requirements`."""
        from ...ffi.artefact import Requirements

        return Requirements.from_json(self.meta["requires"])


def _read(key: str, name: str) -> Saved | None:
    found = read_entry(SECTION, key)
    if found is None:
        return None
    try:
        saved = Saved(found.files[name], found.meta, found.path, found.readonly)
        if name == LIBRARY:
            saved.requires()  # a malformed record is a damaged entry, here
        return saved
    except (KeyError, TypeError, ValueError) as err:
        entry_fault(DAMAGED, f"'{found.path}' is not a Warp entry ({err!r})")
        return None


def read(target: str) -> Saved | None:
    """Warp's object for ``target`` and its parts, verified; None when the cache has
    none."""
    return _read(target, OBJECT)


def read_linked(key: str) -> Saved | None:
    """The linked handler of entry ``key`` and its parts, verified; None when the
    cache has none."""
    return _read(key, LIBRARY)
