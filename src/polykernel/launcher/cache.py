"""GPU kernels in the cache: what a new process needs to launch a kernel it never
compiled, and what it needs not to compile a kernel again.

Two sections:

- ``<root>/gpu/<kernel id>/``: every kernel registered with the launcher (a
  Numba-CUDA kernel, a Triton cubin, a Warp build) — its images, its entry symbol
  and its launch spec as JSON. A program exported in one process names kernels
  only by their content-derived ids (the ``kernel`` attribute of each launcher
  call), so :func:`~.revive.load_kernel` can register one again in another process
  from the cache alone — after checking that the stored content still hashes to
  the id it is filed under.
- ``<root>/gpu_builds/<build key>/``: what a compiler produced (entry, images and
  the backend's own fields, such as Triton's warps and shared memory), filed under
  a key the backend computes from the *content* it would compile — the kernel's
  code and what it reaches, its signature and options, the architectures, the
  compiler's versions and settings (:func:`build_key`). A backend looks its key up
  before compiling (:func:`load_build`) and files what it compiled on a miss
  (:func:`save_build`), so a new process whose cache holds the build runs no
  compiler, imports none of its modules and starts no process; the launch spec,
  which depends on the call (shapes, scalar values, grid), is made from the build
  in Python. Builds are separate from kernels because one build serves every
  launch spec (a new scalar value or shape is a new kernel, not a new compile).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._version import __version__
from ..cache.entries import DAMAGED, entry_fault, entry_path, publish_entry, read_entry
from .images import KernelImage
from .layout import ABI_VERSION, BufferSpec, LaunchSpec, Param

__all__ = [
    "BUILDS",
    "SECTION",
    "Build",
    "build_key",
    "cached_build",
    "load_build",
    "save_build",
    "save_kernel",
    "spec_from_json",
    "spec_to_json",
]

#: The cache section holding launcher kernels.
SECTION = "gpu"
#: The cache section holding compiled builds, by content key.
BUILDS = "gpu_builds"
_T = TypeVar("_T")
# Bumped whenever what a build entry holds, or how a key is formed, changes: an
# older entry then is never found (its key differs), so never misread.
_BUILD_FORMAT = 1


def spec_to_json(spec: LaunchSpec) -> dict[str, Any]:
    """``spec`` as JSON-ready data (:func:`spec_from_json` reads it back)."""
    return {
        "n_in": spec.n_in,
        "buffers": [[b.dtype, list(b.shape)] for b in spec.buffers],
        "params": [
            [p.size, None if p.value is None else p.value.hex(), p.buffer, p.align]
            for p in spec.params
        ],
        "grid": list(spec.grid),
        "block": list(spec.block),
        "shared_mem": spec.shared_mem,
    }


def spec_from_json(data: dict[str, Any]) -> LaunchSpec:
    """The :class:`LaunchSpec` that :func:`spec_to_json` wrote."""
    return LaunchSpec(
        n_in=int(data["n_in"]),
        buffers=tuple(
            BufferSpec(str(d), tuple(int(x) for x in s)) for d, s in data["buffers"]
        ),
        params=tuple(
            Param(int(size), _bytes(value), buffer, int(align))
            for size, value, buffer, align in data["params"]
        ),
        grid=_three(data["grid"]),
        block=_three(data["block"]),
        shared_mem=int(data["shared_mem"]),
    )


def _three(values: list[Any]) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in values)
    return x, y, z


def _bytes(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def save_kernel(kernel: Any) -> bool:
    """Keep a registered :class:`~.launcher.GpuKernel` in the cache (best effort)."""
    if (entry_path(SECTION, kernel.kernel_id) / "meta.json").exists():
        return True
    names = [f"{im.kind}-{im.arch}.img" for im in kernel.images]
    files = {n: im.data for n, im in zip(names, kernel.images, strict=True)}
    files["spec.json"] = json.dumps(spec_to_json(kernel.spec)).encode()
    meta = {
        "entry": kernel.entry,
        "name": kernel.name,
        "images": [
            [im.kind, im.arch, n] for n, im in zip(names, kernel.images, strict=True)
        ],
    }
    return publish_entry(SECTION, kernel.kernel_id, files, meta) is not None


@dataclass(frozen=True)
class Build:
    """What a compile produced, as the launcher needs it.

    Attributes:
        entry: the kernel's symbol in the images.
        images: its cubin/PTX images.
        fields: the backend's own facts of the build (JSON values), which its
            launch spec is made from (Triton: warps, shared memory, scratch sizes).
    """

    entry: str
    images: tuple[KernelImage, ...]
    fields: Mapping[str, Any] = field(default_factory=dict)


def build_key(technology: str, parts: Mapping[str, Any]) -> str:
    """The content key of a build: ``technology`` and the named ``parts`` (JSON
    values: digests, versions, settings...) the backend says decide its output.

    The same parts give the same key in every process; polykernel's version, the
    launcher's ABI and the entry format are part of every key.

    Example:
        >>> from polykernel.launcher.cache import build_key
        >>> build_key("triton", {"a": 1, "b": "x"}) == build_key(
        ...     "triton", {"b": "x", "a": 1})
        True
    """
    record = {
        "format": _BUILD_FORMAT,
        "abi": ABI_VERSION,
        "polykernel": __version__,
        "technology": technology,
        "parts": dict(parts),
    }
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def save_build(key: str, build: Build) -> bool:
    """File ``build`` under ``key`` (best effort: False when the cache cannot
    take it; the caller goes on with what it compiled)."""
    if (entry_path(BUILDS, key) / "meta.json").exists():
        return True
    names = [f"{im.kind}-{im.arch}.img" for im in build.images]
    files = {n: im.data for n, im in zip(names, build.images, strict=True)}
    meta = {
        "entry": build.entry,
        "images": [
            [im.kind, im.arch, n] for n, im in zip(names, build.images, strict=True)
        ],
        "fields": dict(build.fields),
    }
    return publish_entry(BUILDS, key, files, meta) is not None


def load_build(key: str) -> Build | None:
    """The build filed under ``key``, or None (a miss: not there, or an entry that
    is not a build, which is reported once as a damaged entry)."""
    found = read_entry(BUILDS, key)
    if found is None:
        return None
    try:
        meta = found.meta
        images = tuple(KernelImage(str(kind), str(arch), found.files[name])
                       for kind, arch, name in meta["images"])  # fmt: skip
        entry, fields = meta["entry"], meta["fields"]
        if not images or not isinstance(entry, str) or not isinstance(fields, dict):
            raise ValueError("no images, or an entry or fields of the wrong type")
    except (KeyError, ValueError, TypeError) as err:
        entry_fault(DAMAGED, f"'{found.path}' is not a GPU build's entry ({err!r})")
        return None
    return Build(entry, images, fields)


def cached_build(
    key: str | None,
    compile: Callable[[], _T],
    to_build: Callable[[_T], Build],
    from_build: Callable[[Build], _T | None],
) -> _T:
    """What a backend compiles, through the build cache: ``from_build`` of the
    build filed under ``key``, else ``compile()``'s result, filed there.

    ``from_build`` answers None for a build it cannot read (a miss: compiled
    again); ``key`` None (no content key): compiled and not kept.
    """
    found = load_build(key) if key is not None else None
    known = from_build(found) if found is not None else None
    if known is not None:
        return known
    made = compile()
    if key is not None:
        save_build(key, to_build(made))
    return made
