"""Hermetic export: one file holding a program and every kernel it calls.

:func:`export_bundle` writes the serialised ``jax.export`` program, the shared
object of every polykernel kernel it calls (each kernel's artefact, see
:mod:`polykernel.ffi.artefact`), the libraries they need, the dispatch decisions
it was lowered with and a SHA-256 per file (:mod:`.bundle_file`).
:func:`load_bundle` checks all of it against this machine and process first —
checksums, architecture and CPU instruction set, the XLA FFI version and layout
each handler needs — then opens the libraries with :mod:`ctypes`, registers each
kernel's target and deserialises the program. Loading needs jax, jaxlib and NumPy
only: no polykernel cache, no compiler, no Numba, llvmlite or Warp.

The libraries are opened from anonymous in-memory files where the OS has them
(Linux ``memfd``), else from a private folder under the cache, so loading writes
nothing a user must clean up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..errors import (
    BundleError,
    BundleFfiVersionError,
    BundleFormatError,
    BundleMachineError,
    KernelTypeError,
)
from ..ffi import artefact as artefacts, targets
from ..platforms import platform_of
from . import bundle_file, bundle_gpu
from .exporting import _as_exported, export, exported_targets

if TYPE_CHECKING:
    from jax.export import Exported

__all__ = ["Bundle", "export_bundle", "load_bundle"]

_RUNTIME = "libs/polykernel_runtime.so"


@dataclass
class Bundle:
    """A loaded bundle: call it like ``jax.export.deserialize(...).call``.

    Attributes:
        exported: the ``jax.export.Exported`` program.
        kernels: the FFI targets of the kernels it carries.
        decisions: the dispatch decisions the program was lowered with (one dict
            per primitive call: primitive, platform, backend, params, reason, line).
        manifest: everything the bundle records (versions, machine, checksums).
        load_seconds: how long :func:`load_bundle` took.
        gpu_kernels: the ids of the GPU kernels it carries for polykernel's GPU
            launcher (Triton, Numba-CUDA, Warp on a GPU).
    """

    exported: Exported
    kernels: tuple[str, ...]
    decisions: list[dict[str, Any]]
    manifest: dict[str, Any]
    load_seconds: float = 0.0
    gpu_kernels: tuple[str, ...] = ()

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program (``Exported.call``)."""
        return self.exported.call(*args, **kwargs)

    __call__ = call


def export_bundle(
    exported_or_fn: Exported | Callable[..., Any] | bytes,
    path: str | os.PathLike[str],
    *args: Any,
    platforms: Sequence[str] | None = None,
    **kwargs: Any,
) -> Path:
    """Write a program and every kernel it calls into one file.

    Args:
        exported_or_fn: a ``jax.export.Exported`` (or its serialised bytes), or a
            function to export with :func:`polykernel.export` for ``*args``.
        path: the bundle file to write (replaced atomically).
        *args: the argument specs (``jax.ShapeDtypeStruct`` or arrays) when
            ``exported_or_fn`` is a function.
        platforms: lowering platforms for a function (default: the default
            device's).
        **kwargs: keyword arguments of the function (static for the export).

    Returns:
        The bundle's path.

    Raises:
        BundleError: a kernel the program calls has no loadable artefact (its
            backend cannot build one, or it was built where no linker was
            found); the message names each and why.

    Example:
        >>> import jax, jax.numpy as jnp, numba, polykernel as pk
        >>> @numba.njit
        ... def triple(x, out):
        ...     for i in range(out.size):
        ...         out[i] = 3 * x[i]
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> f = jax.jit(pk.numba_kernel(triple, spec))
        >>> _ = pk.export_bundle(f, "triple.pkb", spec)
        >>> pk.load_bundle("triple.pkb")(jnp.ones(4, jnp.float32)).tolist()
        [3.0, 3.0, 3.0, 3.0]
    """
    import jax

    decisions: list[dict[str, Any]] = []
    if isinstance(exported_or_fn, (bytes, bytearray, memoryview, jax.export.Exported)):
        exported = _as_exported(exported_or_fn, "export_bundle")
    elif callable(exported_or_fn):
        exported = export(exported_or_fn, platforms=platforms)(*args, **kwargs)
        decisions = _decisions(exported_or_fn, exported, args, kwargs)
    else:
        raise KernelTypeError(
            f"polykernel.export_bundle: expected a jax.export.Exported, its bytes or "
            f"a function, got {type(exported_or_fn).__name__}."
        )
    from .portable import for_every_line

    exported = for_every_line(exported)  # readable by every JAX line in our range
    files: dict[str, bytes] = {bundle_file.PROGRAM: bytes(exported.serialize())}
    kernels, needs_runtime, launches = _kernels(exported, files)
    libraries = []
    if needs_runtime:
        from ..native.runtime import runtime_library

        files[_RUNTIME] = Path(runtime_library()).read_bytes()
        libraries.append(_RUNTIME)
    manifest = {
        "polykernel": __version__,
        "jax": jax.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": artefacts.machine(),
        "platforms": list(exported.platforms),
        "kernels": kernels,
        "libraries": libraries,
        "decisions": decisions,
    }
    if launches:
        from .exporting import _program_text

        program = _program_text(exported, "export_bundle")
        manifest["launcher"] = bundle_gpu.launcher_part(program, files)
    return bundle_file.write(path, manifest, files)


def _kernels(exported: Exported, files: dict[str, bytes]) -> tuple[list, bool, bool]:
    """The manifest's kernel records; each artefact's bytes go into ``files``.
    Also whether they need the runtime library, and the GPU launcher."""
    from ..ffi.metadata import query_metadata

    kernels, lacking, needs_runtime, launches = [], [], False, False
    for name in exported_targets(exported):
        record = targets.lookup(name)
        if record is None:
            continue  # not polykernel's: JAX's own or a user's custom call
        if record.backend == bundle_gpu.LAUNCHER_BACKEND:
            launches = True  # its kernels are named in the program (bundle_gpu)
            continue
        found = record.artefact
        if found is None:
            why = record.note or f"the {record.backend} backend builds no artefact"
            lacking.append(f"'{name}' ({record.backend} '{record.label}'): {why}")
            continue
        data = Path(found.library).read_bytes()
        if found.sha256 and bundle_file.sha256(data) != found.sha256:
            lacking.append(f"'{name}': its library {found.library} changed on disk")
            continue
        file = f"kernels/{name}.so"
        files[file] = data
        needs_runtime |= found.requires.runtime
        kernels.append({
            "target": name, "platform": record.platform.value,
            "backend": record.backend, "label": record.label,
            "identity": record.identity, "symbol": found.symbol, "file": file,
            "requires": found.to_json()["requires"],
            "api_version": list(query_metadata(record.address).api_version),
        })  # fmt: skip
    if lacking:
        raise BundleError(
            "polykernel.export_bundle: these kernels have no artefact to carry: "
            + "; ".join(lacking)
            + ". Build them on a machine with a C compiler (cc/gcc), or export "
            "with pk.export and run the program where the cache is."
        )
    return kernels, needs_runtime, launches


def _decisions(fn: Callable, exported: Exported, args: tuple, kwargs: dict) -> list:
    from .explain import explain_dispatch

    found = []
    for platform in exported.platforms:
        try:
            ours = platform_of(platform) or platform
            decided = explain_dispatch(fn, *args, platform=ours, **kwargs)
        except Exception:
            continue
        for d in decided:
            found.append({
                "primitive": d.primitive, "platform": d.platform,
                "backend": d.backend, "reason": str(d.reason.value),
                "params": {k: repr(v) for k, v in sorted(d.params.items())},
                "line": str(d),
            })  # fmt: skip
    return found


def load_bundle(path: str | os.PathLike[str]) -> Bundle:
    """Check a bundle against this machine, register its kernels, and return it.

    Raises:
        BundleFormatError: not a bundle, damaged, or a newer format.
        BundleChecksumError: a file was changed after it was written.
        BundleMachineError: a kernel was built for another architecture or for
            CPU instructions this CPU lacks.
        BundleFfiVersionError: a handler speaks an XLA FFI version or layout the
            installed jaxlib does not.
        BundleGpuArchError: a GPU kernel has neither a cubin nor PTX that runs on
            a GPU JAX sees here.
    """
    started = time.perf_counter()
    read = bundle_file.read(path)
    manifest = read.manifest
    where = f"polykernel.load_bundle('{os.fspath(path)}')"
    kernels = manifest.get("kernels", [])
    launcher = manifest.get("launcher")
    _check(where, kernels)
    if launcher or any(k["requires"].get("gpu") for k in kernels):
        devices = bundle_gpu.cuda_device_arches()
        bundle_gpu.check_gpus(where, kernels, launcher, devices)
    from .bundle_load import open_library

    for lib in manifest.get("libraries", []):
        open_library(read.file(lib), lib, read.manifest["files"][lib], shared=True)
    for kernel in kernels:
        name = kernel["target"]
        platform = kernel["platform"]  # XLA's name: cpu, CUDA
        if targets.lookup(name, platform) is not None:
            continue  # the process has it already (same content: same name)
        file = kernel["file"]
        library = open_library(read.file(file), file, read.manifest["files"][file])
        address = artefacts.symbol_address(library, kernel["symbol"])
        targets.register(
            name, address, platform=platform,
            identity=kernel["identity"], backend=kernel["backend"],
            label=kernel["label"], owner=library,
        )  # fmt: skip
    gpu_kernels = bundle_gpu.load_launcher(where, launcher, read) if launcher else ()
    exported = _deserialize(where, read.file(bundle_file.PROGRAM))
    return Bundle(
        exported,
        tuple(k["target"] for k in kernels),
        list(manifest.get("decisions", [])),
        manifest,
        time.perf_counter() - started,
        gpu_kernels,
    )


def _check(where: str, kernels: list[dict[str, Any]]) -> None:
    """Every requirement of every kernel, before anything is loaded."""
    from ..ffi import abi

    try:
        here = abi.installed_api_version()
        layout = artefacts.installed_ffi_digest()
    except Exception as err:
        raise BundleFfiVersionError(f"{where}: {err}") from err
    for kernel in kernels:
        label = kernel.get("label") or kernel["target"]
        name = f"kernel '{label}' ({kernel['backend']})"
        req = artefacts.Requirements.from_json(kernel["requires"])
        for kind, text in artefacts.problems(req, ffi=layout):
            cls = BundleFfiVersionError if kind == "ffi" else BundleMachineError
            raise cls(
                f"{where}: {name} cannot run here: {text}. Write the bundle on a "
                f"machine like this one (or one whose CPU it shares), with a jaxlib "
                f"of the same FFI layout."
            )
        major, minor = kernel["api_version"]
        if major != here[0] or not 1 <= minor <= here[1]:
            raise BundleFfiVersionError(
                f"{where}: {name}'s handler speaks XLA FFI API {major}.{minor}, and "
                f"the installed jaxlib accepts {here[0]}.1 to {here[0]}.{here[1]} "
                f"({abi.SUPPORTED_VERSIONS.get(here, 'this jaxlib')}). Write the "
                f"bundle with a jaxlib whose FFI version is at most {here[0]}."
                f"{here[1]}, or upgrade jax and jaxlib here."
            )


def _deserialize(where: str, blob: bytes) -> Exported:
    """The program, read now: a StableHLO this JAX cannot read (written by a newer
    JAX) is a named error at load, not a failure of the first call."""
    from .exporting import _program_text

    try:
        exported = _as_exported(blob, "load_bundle")
        _program_text(exported, "load_bundle")
        return exported
    except Exception as err:
        raise BundleFormatError(f"{where}: {err}") from err
