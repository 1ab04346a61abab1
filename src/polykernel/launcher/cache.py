"""GPU kernels in the cache: what a new process needs to launch a kernel it never
compiled.

Every kernel registered with the launcher (a Numba-CUDA kernel, a Triton cubin, a
Warp build) is also kept in the cache, under ``<root>/gpu/<kernel id>/``: its images,
its entry symbol and its launch spec as JSON. A program exported in one process
names kernels only by their content-derived ids (the ``kernel`` attribute of each
launcher call), so :func:`load_kernel` can register one again in another process
from the cache alone — after checking that the stored content still hashes to the
id it is filed under (:mod:`.revive`).
"""

from __future__ import annotations

import json
from typing import Any

from ..cache.entries import entry_path, publish_entry
from .layout import BufferSpec, LaunchSpec, Param

__all__ = ["SECTION", "save_kernel", "spec_from_json", "spec_to_json"]

#: The cache section holding launcher kernels.
SECTION = "gpu"


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
