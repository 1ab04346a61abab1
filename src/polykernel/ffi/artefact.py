"""A kernel as an artefact: a shared object holding its XLA FFI handler.

A CPU backend builds each kernel once into a shared object whose exported handler
XLA calls. Loading one needs :mod:`ctypes` and nothing else: no compiler package is
imported, no JIT links anything, no process starts. What the code needs from the
process is resolved by the dynamic loader, by name, never by an address of the
process that built it: the CPython C API (every handler's error path) and, for
Numba code, polykernel's runtime library (Numba's helper and threading-layer
functions, :mod:`polykernel.native.runtime`), which is loaded first, globally.

What an artefact needs from the machine that loads it is recorded beside it
(:class:`Requirements`) and checked before it is loaded (:func:`problems`):

- ``machine``: the processor architecture and OS (``x86_64-linux``);
- ``isa``: the instruction-set extensions of the machine that built it (code
  compiled for its host may use any of them), as ``/proc/cpuinfo`` names them;
- ``ffi``: the XLA FFI structure layout the handler was generated for, as a
  digest (:func:`ffi_layout_digest`): the same layout in another jaxlib is the
  same handler;
- ``runtime``: it needs polykernel's runtime library;
- ``gpu`` and ``ptx``: for CUDA code, the architectures it holds machine code
  (cubin) for and those it holds PTX for; a GPU runs it when one of them fits
  (:func:`gpu_fits`).

:class:`Artefact` describes one loadable handler: the target it registers, its
library and symbol, the library's SHA-256 and its requirements. The target
registry keeps it with the target, so :mod:`polykernel.core.bundle` can carry it.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import KernelLoadError

__all__ = [
    "ISA_FLAGS",
    "Artefact",
    "Requirements",
    "ffi_layout_digest",
    "file_sha256",
    "gpu_fits",
    "host_isa",
    "installed_ffi_digest",
    "load_library",
    "machine",
    "problems",
    "symbol_address",
]

#: The instruction-set extensions compiled code may use, as ``/proc/cpuinfo`` names
#: them (an artefact records those its build machine had; the loading machine must
#: have them all). Flags that do not change what code may execute are left out.
_ISA_TEXT = """sse sse2 pni ssse3 sse4_1 sse4_2 popcnt avx avx2 fma f16c bmi1 bmi2 abm
    movbe adx aes pclmulqdq sha_ni gfni vaes vpclmulqdq avx512f avx512dq avx512cd
    avx512bw avx512vl avx512ifma avx512vbmi avx512_vbmi2 avx512_vnni avx512_bitalg
    avx512_vpopcntdq avx512_bf16 avx512_fp16 avx_vnni amx_tile amx_int8 amx_bf16
    asimd sve sve2"""
ISA_FLAGS = frozenset(_ISA_TEXT.split())


def machine() -> str:
    """``<architecture>-<os>`` of this process, e.g. ``x86_64-linux``."""
    return f"{platform.machine().lower()}-{sys.platform}"


@functools.cache
def host_isa() -> frozenset[str] | None:
    """The tracked instruction-set extensions this CPU has; None where the OS does
    not say (then no artefact's ISA can be checked, and none is refused for it)."""
    try:  # line by line: the first CPU's flags are enough (a big host lists many)
        with open("/proc/cpuinfo", errors="replace") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                if name.strip() in ("flags", "Features"):
                    return frozenset(value.split()) & ISA_FLAGS
    except OSError:
        pass
    return None


#: Layout facts no handler reads: the size of ``XLA_FFI_Api``, which grows as each
#: jaxlib appends entries (jaxlib 0.10, 0.11 and 0.12 differ only there), while the
#: offsets handlers read stay put. Leaving it out keeps one handler loadable on every
#: jaxlib whose offsets match.
_UNREAD = frozenset({"API_STRUCT_SIZE"})


def ffi_layout_digest(layout: dict[str, int], api: tuple[int, int]) -> str:
    """A digest of the FFI facts a generated handler bakes in: the structure offsets
    it reads and the API version it reports."""
    read = {k: v for k, v in layout.items() if k not in _UNREAD}
    data = json.dumps({"layout": read, "api": list(api)}, sort_keys=True)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


@functools.cache
def installed_ffi_digest() -> str:
    """:func:`ffi_layout_digest` of the handlers generated for the installed jaxlib
    (the layout it reads, the API version they answer)."""
    from . import abi

    return ffi_layout_digest(abi.layout(), (abi.API_MAJOR, abi.API_MINOR))


@dataclass(frozen=True)
class Requirements:
    """What an artefact needs from the machine and process that load it."""

    machine: str
    isa: tuple[str, ...] = ()
    ffi: str = ""  # ffi_layout_digest of a generated handler; "" for compiled C++
    runtime: bool = False
    gpu: tuple[str, ...] = ()  # CUDA: the architectures of its cubins ('80', '90a')
    ptx: tuple[str, ...] = ()  # CUDA: the architectures of its PTX

    @classmethod
    def here(cls, *, ffi: str = "", runtime: bool = False) -> Requirements:
        """The requirements of code built for this machine's host CPU."""
        return cls(machine(), tuple(sorted(host_isa() or ())), ffi, runtime)

    def to_json(self) -> dict[str, Any]:
        data = {**asdict(self), "isa": list(self.isa)}
        return {**data, "gpu": list(self.gpu), "ptx": list(self.ptx)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Requirements:
        """Read back :meth:`to_json` (a cache entry's or a bundle's record; an older
        record without ``gpu``/``ptx`` is CPU code)."""

        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(x) for x in data.get(key, ()))

        ffi, runtime = str(data.get("ffi", "")), bool(data.get("runtime", False))
        return cls(str(data["machine"]), strings("isa"), ffi, runtime,
                   strings("gpu"), strings("ptx"))  # fmt: skip


@dataclass(frozen=True)
class Artefact:
    """One loadable handler: the target it registers and where its code is."""

    target: str
    backend: str
    library: str  # path of the shared object
    symbol: str  # the handler's exported symbol
    sha256: str  # of the library's bytes ("": taken when it is carried)
    requires: Requirements
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "requires": self.requires.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Artefact:
        return cls(**{**data, "requires": Requirements.from_json(data["requires"])})


def problems(req: Requirements, *, ffi: str | None = None) -> list[tuple[str, str]]:
    """Why this process cannot load code with requirements ``req``: a list of
    ``(kind, explanation)`` with kind ``machine``, ``isa`` or ``ffi`` (empty: it can).
    ``ffi`` is this process's layout digest, when the artefact has one to match."""
    found = []
    if req.machine != machine():
        here = machine()
        found.append(("machine", f"built for {req.machine}, this machine is {here}"))
    host = host_isa()
    missing = sorted(set(req.isa) - host) if host is not None else []
    if missing:
        found.append(
            ("isa", f"built for a CPU with {', '.join(missing)}, which this CPU lacks")
        )
    if req.ffi and ffi is not None and req.ffi != ffi:
        text = f"generated for FFI layout {req.ffi}, the installed jaxlib's is {ffi}"
        found.append(("ffi", text))
    return found


def _cc(arch: str) -> tuple[int, int, str]:
    """``'86'`` -> ``(8, 6, '')``, ``'90a'`` -> ``(9, 0, 'a')``."""
    digits = arch.rstrip("af")
    return int(digits[:-1]), int(digits[-1]), arch[len(digits) :]


def gpu_fits(device: str, cubins: Sequence[str], ptx: Sequence[str]) -> bool:
    """Whether CUDA code with machine code for ``cubins`` and PTX for ``ptx`` runs
    on a GPU of architecture ``device`` (all as ``'80'``, ``'90a'``).

    A cubin runs on its own major architecture from its minor one up (``'80'`` on
    an 8.6 GPU, not on 9.0); PTX is compiled by the driver for any GPU from its
    architecture up. An ``a``/``f`` variant uses features of its own GPU only.

    Example:
        >>> from polykernel.ffi.artefact import gpu_fits
        >>> gpu_fits("86", ["80"], []), gpu_fits("90", ["80"], [])
        (True, False)
        >>> gpu_fits("90", ["80"], ["80"]), gpu_fits("80", [], ["90"])
        (True, False)
    """
    major, minor, _ = _cc(device)  # a device's own variant changes nothing
    for arch in cubins:
        a_major, a_minor, a_variant = _cc(arch)
        if a_variant:
            if (a_major, a_minor) == (major, minor):
                return True
        elif a_major == major and a_minor <= minor:
            return True
    for arch in ptx:
        a_major, a_minor, a_variant = _cc(arch)
        if a_variant and (a_major, a_minor) == (major, minor):
            return True
        if not a_variant and (a_major, a_minor) <= (major, minor):
            return True
    return False


def file_sha256(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_library(path: str | os.PathLike[str], *, shared: bool = False) -> ctypes.CDLL:
    """Open a shared object; ``shared`` makes its symbols resolve later ones'
    (the runtime library's for kernels).

    Raises:
        KernelLoadError: the loader refused it (missing file, wrong machine,
            an unresolved symbol).
    """
    mode = ctypes.RTLD_GLOBAL if shared else ctypes.RTLD_LOCAL
    try:
        return ctypes.CDLL(os.fspath(path), mode=mode | os.RTLD_NOW)
    except OSError as err:
        raise KernelLoadError(
            f"polykernel: cannot load the kernel library {os.fspath(path)}: {err}. "
            f"Rebuild it (polykernel cache clear, then run the program again), or "
            f"load it on a machine that has what it needs."
        ) from err


def symbol_address(library: ctypes.CDLL, symbol: str) -> int:
    """The address of ``symbol`` in ``library``.

    Raises:
        KernelLoadError: the library does not define it.
    """
    try:
        return ctypes.cast(getattr(library, symbol), ctypes.c_void_p).value or 0
    except AttributeError as err:
        raise KernelLoadError(
            f"polykernel: the kernel library {library._name} does not define the "
            f"handler '{symbol}'; it is damaged or not polykernel's. Rebuild it "
            f"(polykernel cache clear)."
        ) from err
