"""Register compiled GPU kernels with the native launcher; call them from JAX.

:func:`register_gpu_kernel` takes a kernel's images (cubin and/or PTX per
architecture), its entry symbol and its :class:`~polykernel.launcher.layout.LaunchSpec`,
gives it an identity derived from that content only, and hands all of it to the
native launcher's process-wide table. XLA sees two FFI targets for the whole
process, registered for CUDA on first use:

* ``polykernel_gpu_launch`` (command-buffer compatible: XLA may record it in CUDA
  graphs), and ``polykernel_gpu_launch_nograph`` (for ``allow_cuda_graph=False``);

and every call carries the kernel's id as the string attribute ``kernel``. Ids are
``"pkgpu_" + sha256(ABI version, entry, spec bytes, every image's kind, arch and
sha256)[:32]``: the same in every process, so ``jax.export`` artefacts and JAX's
persistent compilation cache refer to kernels by content. A program that calls a
kernel the running process has not registered fails with a message saying so.
Modules load lazily, once per CUDA context (one per device), on the context of
XLA's stream; the image picked is the exact cubin for the device, else a cubin of
the same major architecture, else PTX.

Example:
    >>> from polykernel.launcher.kernels import KernelImage, register_gpu_kernel
    >>> from polykernel.launcher.layout import BufferSpec, LaunchSpec, pointer
    >>> spec = LaunchSpec(n_in=1, buffers=(BufferSpec("float32", (8,)),) * 2,
    ...                   params=(pointer(0), pointer(1)), grid=(1, 1, 1),
    ...                   block=(8, 1, 1))
    >>> k = register_gpu_kernel(KernelImage("cubin", "90", cubin), "copy", spec)
    ...     # (needs a GPU: a cubin built for the device)  # doctest: +SKIP
    >>> y = k(x)  # (needs a GPU: the launcher runs CUDA kernels)  # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import KernelRegistrationError
from ..ffi import targets
from .build import launcher_library
from .images import _KINDS, KernelImage
from .layout import ABI_VERSION, LaunchSpec

__all__ = [
    "GRAPH_TARGET",
    "NOGRAPH_TARGET",
    "GpuKernel",
    "KernelImage",
    "register_gpu_kernel",
    "register_launcher_targets",
    "registered_gpu_kernels",
]

GRAPH_TARGET = "polykernel_gpu_launch"
NOGRAPH_TARGET = "polykernel_gpu_launch_nograph"
_lock = threading.Lock()
_kernels: dict[str, GpuKernel] = {}


@dataclass(frozen=True)
class GpuKernel:
    """A kernel registered with the launcher; call it with input arrays.

    Attributes:
        kernel_id: the content-derived id (the ``kernel`` attribute of each call).
        target: the FFI target calls go to (graph-compatible or not).
        name: a readable name used in messages.
        spec: its launch spec; ``outs()`` gives the output shapes and dtypes.
    """

    kernel_id: str
    target: str
    name: str
    spec: LaunchSpec
    images: tuple[KernelImage, ...]
    entry: str = ""

    def outs(self) -> list[Any]:
        import jax

        from .layout import _dtype

        return [
            jax.ShapeDtypeStruct(b.shape, _dtype(b.dtype))
            for b in self.spec.buffers[self.spec.n_in :]
        ]

    def attributes(self) -> dict[str, str]:
        """The FFI attributes of a call: ``{"kernel": kernel_id}``."""
        return {"kernel": self.kernel_id}

    def __call__(
        self,
        *args: Any,
        input_output_aliases: dict[int, int] | None = None,
        vmap_method: str | None = None,
    ) -> list[Any]:
        """Emit the launcher's custom call (runs on a CUDA device only)."""
        import jax

        call = jax.ffi.ffi_call(
            self.target,
            self.outs(),
            input_output_aliases=input_output_aliases,
            vmap_method=vmap_method,
        )
        return list(call(*args, **self.attributes()))


def kernel_id(entry: str, spec: LaunchSpec, images: Sequence[KernelImage]) -> str:
    """The content-derived id of a kernel (stable across processes and machines)."""
    h = hashlib.sha256(f"pkgpu abi {ABI_VERSION}\0{entry}\0".encode())
    h.update(spec.encode())
    for im in sorted(images, key=lambda i: (i.kind, i.arch)):
        h.update(f"\0{im.kind}\0{im.arch}\0".encode())
        h.update(hashlib.sha256(im.data).digest())
    return "pkgpu_" + h.hexdigest()[:32]


def register_launcher_targets() -> None:
    """Register the launcher's two handlers for CUDA (once per process), through
    the one target registry; their identity is the launcher library's ABI."""
    lib = launcher_library()
    for name, address in (
        (GRAPH_TARGET, lib.launch),
        (NOGRAPH_TARGET, lib.launch_nograph),
    ):
        targets.register(
            name,
            address,
            platform="CUDA",
            identity=f"pkgpu launcher abi {ABI_VERSION}",
            backend="gpu_launcher",
            label="polykernel GPU launcher",
            owner=lib,
        )


def register_gpu_kernel(
    images: KernelImage | Sequence[KernelImage],
    entry: str,
    spec: LaunchSpec,
    *,
    name: str | None = None,
    allow_cuda_graph: bool = True,
    save: bool = True,
) -> GpuKernel:
    """Register a compiled kernel with the native launcher (idempotent).

    Args:
        images: the kernel's cubin/PTX images (one per architecture at most).
        entry: the kernel's symbol in the images (e.g. a mangled Numba name).
        spec: buffers, parameter layout and launch configuration.
        name: a readable name for messages (default: ``entry``).
        allow_cuda_graph: ``False`` sends calls to the handler that tells XLA not to
            record it in CUDA graphs.
        save: ``False`` keeps it out of the cache (a bundle's kernels: loading one
            writes nothing).

    Returns:
        The :class:`GpuKernel`; calling it emits the custom call.

    Raises:
        KernelRegistrationError: no image, or the launcher refused the spec.
    """
    images = (images,) if isinstance(images, KernelImage) else tuple(images)
    if not images:
        raise KernelRegistrationError(
            f"polykernel.launcher: kernel '{name or entry}' has no image; pass at "
            "least one KernelImage (cubin or PTX)."
        )
    kid = kernel_id(entry, spec, images)
    target = GRAPH_TARGET if allow_cuda_graph else NOGRAPH_TARGET
    with _lock:
        known = _kernels.get(kid)
        if known is None:
            _register_native(kid, name or entry, entry, spec, images)
            register_launcher_targets()
            known = GpuKernel(kid, target, name or entry, spec, images, entry)
            _kernels[kid] = known
            fresh = True
        else:
            fresh = False
    if fresh and save:
        from .cache import save_kernel

        save_kernel(known)  # a new process can launch it from the cache
    if known.target != target:
        return GpuKernel(kid, target, name or known.name, spec, images, entry)
    return known


def _register_native(kid, name, entry, spec, images) -> None:
    lib = launcher_library()
    n = len(images)
    kinds = (ctypes.c_int64 * n)(*(_KINDS[i.kind] for i in images))
    arches = (ctypes.c_int64 * n)(*(i.arch_number for i in images))
    buffers = [ctypes.create_string_buffer(i.data, len(i.data)) for i in images]
    pointers = (ctypes.c_void_p * n)(*(ctypes.addressof(b) for b in buffers))
    sizes = (ctypes.c_int64 * n)(*(len(i.data) for i in images))
    blob = spec.encode()
    err = ctypes.create_string_buffer(1024)
    rc = lib.dll.pkgpu_register(
        kid.encode(), name.encode(), entry.encode(), blob, len(blob), n, kinds,
        arches, pointers, sizes, err, len(err),
    )  # fmt: skip
    if rc != 0:
        raise KernelRegistrationError(
            f"polykernel.launcher: the launcher refused kernel '{name}': "
            f"{err.value.decode('utf-8', 'replace')}"
        )


def registered_gpu_kernels() -> dict[str, GpuKernel]:
    """Every kernel this process registered with the launcher (id -> kernel)."""
    with _lock:
        return dict(_kernels)
