"""GPU kernels in a bundle: the launcher's kernels, and the GPUs they run on.

Two kinds of GPU code travel in a bundle:

- a C++/CUDA module (``load_cuda_inline``/``load_cuda_file``) is a kernel library
  like any other: its fat binary holds a cubin per declared architecture and the
  newest one's PTX, recorded in its requirements (``gpu``, ``ptx``);
- kernels launched by polykernel's native GPU launcher (Triton, Numba-CUDA, Warp on
  a GPU) are images (cubins and PTX), an entry symbol and a launch spec, which the
  program names by content-derived id. The bundle carries the launcher library
  once and each kernel's images and spec; :func:`load_launcher` registers them
  with the process's launcher (the bundle's own when the process has none).

Where JAX sees CUDA GPUs, every GPU kernel must fit each of them
(:func:`~polykernel.ffi.artefact.gpu_fits`): a cubin of its architecture family or
PTX it can compile, else loading stops with :class:`~polykernel.BundleGpuArchError`
before anything is registered. Where it sees none, the GPU kernels are registered
all the same (nothing runs them there; the program's CPU lowering still runs).
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import BundleChecksumError, BundleError, BundleGpuArchError
from ..ffi.artefact import gpu_fits

__all__ = [
    "LAUNCHER_BACKEND",
    "check_gpus",
    "cuda_device_arches",
    "launcher_part",
    "load_launcher",
]

#: The backend name the launcher's two FFI targets are registered under.
LAUNCHER_BACKEND = "gpu_launcher"
_LAUNCHER_FILE = "libs/polykernel_gpu_launcher.so"


def launcher_part(program: str, files: dict[str, bytes]) -> dict[str, Any]:
    """The manifest's ``launcher`` record of a program that launches GPU kernels
    through the launcher: its library and every kernel's images and launch spec
    go into ``files``.

    Raises:
        BundleError: a kernel the program launches is neither registered in this
            process nor in the cache.
    """
    from ..launcher.build import launcher_library
    from ..launcher.cache import spec_to_json
    from ..launcher.kernels import registered_gpu_kernels
    from ..launcher.revive import kernel_ids, load_kernel

    known = registered_gpu_kernels()
    kernels, missing = [], []
    for kid in kernel_ids(program):
        kernel = known.get(kid) or load_kernel(kid)
        if kernel is None:
            missing.append(kid)
            continue
        images = []
        for image in kernel.images:
            name = f"gpu/{kid}/{image.kind}-{image.arch}.img"
            files[name] = image.data
            images.append([image.kind, image.arch, name])
        spec = f"gpu/{kid}/spec.json"
        files[spec] = json.dumps(spec_to_json(kernel.spec), sort_keys=True).encode()
        kernels.append(
            {"id": kid, "name": kernel.name, "entry": kernel.entry, "spec": spec,
             "images": images}
        )  # fmt: skip
    if missing:
        raise BundleError(
            f"polykernel.export_bundle: the program launches GPU kernel(s) "
            f"{', '.join(missing)}, which this process has not registered and the "
            f"cache does not hold. Export it from the process that lowered it."
        )
    files[_LAUNCHER_FILE] = launcher_library().path.read_bytes()
    return {"file": _LAUNCHER_FILE, "kernels": kernels}


def cuda_device_arches() -> tuple[str, ...]:
    """The architectures (``'90'``) of the CUDA GPUs JAX sees (a bundle's GPU
    kernels must fit each)."""
    from ..settings.cuda_arch import jax_cuda_arches

    return jax_cuda_arches()


def _launcher_images(launcher: dict[str, Any]) -> list[tuple[str, list, list]]:
    return [
        (
            k["name"],
            [arch for kind, arch, _ in k["images"] if kind == "cubin"],
            [arch for kind, arch, _ in k["images"] if kind == "ptx"],
        )
        for k in launcher.get("kernels", [])
    ]


def check_gpus(
    where: str,
    kernels: list[dict[str, Any]],
    launcher: dict[str, Any] | None,
    devices: tuple[str, ...],
) -> None:
    """Every GPU kernel fits every GPU in ``devices`` (architectures such as
    ``'90'``; empty: no GPU, nothing to check).

    Raises:
        BundleGpuArchError: one does not, naming the kernel, what it holds and
            the GPU.
    """
    if not devices:
        return
    code = [
        (k.get("label") or k["target"], k["requires"].get("gpu", []),
         k["requires"].get("ptx", []))
        for k in kernels
        if k["requires"].get("gpu") or k["requires"].get("ptx")
    ]  # fmt: skip
    code += _launcher_images(launcher or {})
    for name, cubins, ptx in code:
        for device in devices:
            if gpu_fits(device, cubins, ptx):
                continue
            held = ", ".join(
                [f"sm_{a}" for a in cubins] + [f"compute_{a} (PTX)" for a in ptx]
            )
            raise BundleGpuArchError(
                f"{where}: GPU kernel '{name}' holds code for {held or 'nothing'}, "
                f"none of which runs on this sm_{device} GPU (a cubin runs on its "
                f"own architecture family from its version up, PTX on any GPU from "
                f"its version up). Write the bundle with sm_{device} among the "
                f"architectures (options=CompileOptions(cuda_arch=[...]), "
                f"pk.config.set_compute_capability or $POLYKERNEL_CUDA_ARCH), or "
                f"with PTX of an older one."
            )


def load_launcher(where: str, launcher: dict[str, Any], read: Any) -> tuple[str, ...]:
    """Register the bundle's launcher kernels with this process's launcher (the
    bundle's library when the process has none); their ids.

    Raises:
        BundleChecksumError: a kernel's images and spec do not hash to its id.
    """
    from pathlib import Path

    from ..launcher.build import adopt_launcher, loaded_launcher
    from ..launcher.cache import spec_from_json
    from ..launcher.images import KernelImage
    from ..launcher.kernels import kernel_id, register_gpu_kernel
    from .bundle_load import open_library

    if loaded_launcher() is None:
        file = launcher["file"]
        dll = open_library(read.file(file), file, read.manifest["files"][file])
        adopt_launcher(Path(dll._name), dll)
    ids = []
    for k in launcher.get("kernels", []):
        spec = spec_from_json(json.loads(read.file(k["spec"])))
        images = tuple(KernelImage(kind, arch, read.file(name))
                       for kind, arch, name in k["images"])  # fmt: skip
        if kernel_id(k["entry"], spec, images) != k["id"]:
            raise BundleChecksumError(
                f"{where}: GPU kernel '{k['name']}' does not hash to its id "
                f"{k['id']}; the bundle was altered. Write it again."
            )
        register_gpu_kernel(images, k["entry"], spec, name=k["name"], save=False)
        ids.append(k["id"])
    return tuple(ids)
