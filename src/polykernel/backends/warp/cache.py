"""Warp CPU builds in polykernel's cache: what a new process needs to revive a target.

When a Warp CPU target is registered, :func:`save` keeps (section ``warp``, one entry
per target name) a copy of the object file Warp built for the kernel's module and
what the handler was built from: the target name's parts, the entry symbol, the
parameter plan, the call signature and the launch grid. :func:`read` gives them
back, verified (:mod:`polykernel.cache.entries`); :mod:`.revive` uses them.
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

__all__ = ["OBJECT", "SECTION", "Saved", "read", "save"]

#: The cache section holding Warp CPU objects.
SECTION = "warp"
#: The object file's name in an entry.
OBJECT = "module.o"
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


def save(target: str, parts: dict[str, Any], module_exec: Any) -> bool:
    """Keep what :func:`revive` needs for ``target`` (best effort).

    ``parts`` holds the target name's parts (``digest``, ``name``, ``launch``),
    ``entry`` (the symbol), ``plan``, ``sig`` and ``label``.
    """
    if (entry_path(SECTION, target) / "meta.json").exists():
        return True
    path = getattr(module_exec, "binary_path", None)
    try:
        data = Path(path).read_bytes() if path else b""
    except OSError as err:
        log.debug("warp: no CPU object to keep for %s: %s", target, err)
        return False
    if not data:
        return False
    import warp

    meta = {
        "target": target,
        "digest": parts["digest"],
        "name": parts["name"],
        "launch": list(parts["launch"]) if isinstance(parts["launch"], tuple)
        else parts["launch"],
        "entry": parts["entry"],
        "label": parts["label"],
        "plan": _plan_json(parts["plan"]),
        "sig": _sig_json(parts["sig"]),
        "warp": warp.__version__,
    }
    return publish_entry(SECTION, target, {OBJECT: data}, meta) is not None


class Saved:
    """What :func:`save` kept for one target, read back."""

    def __init__(self, data: bytes, meta: dict[str, Any]) -> None:
        self.object = data
        self.meta = meta
        self.digest = str(meta["digest"])
        self.name = str(meta["name"])
        launch = meta["launch"]
        self.launch = tuple(launch) if isinstance(launch, list) else int(launch)
        self.entry = str(meta["entry"])
        self.label = str(meta["label"])
        self.plan = _plan(meta["plan"])
        self.sig = _sig(meta["sig"])
        self.warp = meta.get("warp")


def read(target: str) -> Saved | None:
    """The saved parts of ``target``, verified; None when the cache has none."""
    found = read_entry(SECTION, target)
    if found is None:
        return None
    files, meta = found.files, found.meta
    try:
        return Saved(files[OBJECT], meta)
    except (KeyError, TypeError, ValueError) as err:
        entry_fault(DAMAGED, f"'{found.path}' is not a Warp object's entry ({err!r})")
        return None
