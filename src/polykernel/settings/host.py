"""The host CPU: its model name and instruction-set family, read once per process,
and the cores this process may run on.

One reader of ``/proc/cpuinfo`` for the two places that name the CPU: the tuned
table's key (:mod:`polykernel.dispatch.key`: a winner measured on one CPU model is
reused as-is on that model, as a family match on the same instruction set) and the
benchmark's machine header (:mod:`polykernel.benchmark.machine`).
:func:`usable_cores` is the one answer for the places that size work by cores
(``polykernel cache warm``'s jobs, a ``jax.distributed`` job's tuning turns, the
Numba handler built beside its kernel's compile).
"""

from __future__ import annotations

import functools
import os
import platform
from typing import NamedTuple

__all__ = ["HostCpu", "host_cpu", "usable_cores"]

#: Instruction-set levels, best first: the family is the first one the CPU has.
_LEVELS = ("avx512f", "avx2", "avx", "sve", "asimd", "neon")


class HostCpu(NamedTuple):
    """``model``: the model name (``platform``'s answer outside Linux);
    ``family``: ``<architecture>-<best instruction-set level>``, e.g.
    ``x86_64-avx512f``."""

    model: str
    family: str


@functools.cache
def host_cpu() -> HostCpu:
    """This host's CPU (Linux reads ``/proc/cpuinfo``; elsewhere :mod:`platform`).

    Example:
        >>> from polykernel.settings.host import host_cpu
        >>> cpu = host_cpu()
        >>> isinstance(cpu.model, str) and "-" in cpu.family
        True
    """
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "model name" and not model:
                    model = value.strip()
                elif name in ("flags", "features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    arch = platform.machine() or "unknown"
    level = next((f for f in _LEVELS if f in flags), "base")
    return HostCpu(model or platform.processor() or arch, f"{arch}-{level}")


def usable_cores() -> list[int]:
    """The CPU cores this process may run on, sorted (``os.sched_getaffinity``;
    all the machine's where the OS does not say). Asked each time: a process's
    affinity can change."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))
