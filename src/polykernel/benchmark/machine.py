"""What a benchmark ran on and under which load, as JSON-ready dicts and header lines.

:func:`machine_info` names the machine (CPU model and logical cores, the GPUs JAX
sees, OS, Python and library versions). :class:`LoadMonitor` measures the load a run
met: the 1-minute load average before and after, how many other processes were
running (state ``R`` in ``/proc``) at both ends and, from ``/proc/stat``, the share of
the machine's CPU time that processes other than this one used while it ran. Numbers
measured while other processes used the machine are not comparable with quiet runs;
the header lines say so. Outside Linux the ``/proc`` figures are ``None``.
"""

from __future__ import annotations

import os
import platform as _platform
import textwrap
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ..errors import BenchmarkTypeError
from ..settings.host import host_cpu

__all__ = [
    "LoadMonitor",
    "checked_environment",
    "describe_load",
    "describe_machine",
    "environment_lines",
    "machine_info",
    "merge_environments",
    "merge_loads",
]

# Other processes using more than this share of the machine's CPU time while a run
# measured: its times are marked as measured under load.
BUSY_SHARE = 0.10
_LIBRARIES = ("jax", "jaxlib", "numpy", "numba", "scipy")


def _gpu_names() -> list[str]:
    import jax

    try:
        return [d.device_kind for d in jax.devices("gpu")]
    except RuntimeError:
        return []


def machine_info() -> dict[str, Any]:
    """Describe the machine a benchmark runs on, as a JSON-ready dict.

    Returns:
        ``cpu`` (model name), ``cores`` (logical CPUs), ``os``, ``python``,
        ``versions`` (polykernel, jax, jaxlib, numpy, numba, scipy; None where not
        installed), ``gpus`` (the names of the GPUs JAX sees; empty on a CPU run)
        and ``date`` (UTC, ISO 8601).

    Example:
        >>> from polykernel.benchmark.machine import machine_info
        >>> sorted(machine_info())
        ['cores', 'cpu', 'date', 'gpus', 'os', 'python', 'versions']
    """
    from .._version import __version__, installed_version

    return {
        "cpu": host_cpu().model,
        "cores": os.cpu_count(),
        "os": f"{_platform.system()} {_platform.release()} ({_platform.machine()})",
        "python": _platform.python_version(),
        "versions": {"polykernel": __version__}
        | {d: installed_version(d) for d in _LIBRARIES},
        "gpus": _gpu_names(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _busy_ticks() -> int | None:
    """Jiffies every CPU spent busy (not idle, not waiting for I/O) since boot."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal ...
    values = [int(v) for v in fields[1:9]]
    return sum(values) - values[3] - values[4]


def _other_running() -> int | None:
    """Processes other than this one in state R (running or runnable) right now."""
    own = os.getpid()
    count = 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        if int(pid) == own:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue  # gone, or not ours to read
        # "pid (comm) S ...": comm may hold spaces and parentheses; the state
        # follows the last ')'.
        state = text[text.rfind(b")") + 2 : text.rfind(b")") + 3]
        count += state == b"R"
    return count


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class LoadMonitor:
    """Measure the load a benchmark runs under: ``start()``, run, ``stop()``.

    Example:
        >>> from polykernel.benchmark.machine import LoadMonitor
        >>> load = LoadMonitor().start().stop()
        >>> sorted(load)  # doctest: +NORMALIZE_WHITESPACE
        ['cores', 'loadavg_after', 'loadavg_before', 'other_cpu_share',
         'other_running_after', 'other_running_before', 'seconds']
    """

    def __init__(self) -> None:
        self._start: dict[str, Any] | None = None

    def start(self) -> LoadMonitor:
        """Take the first snapshot (returns ``self``)."""
        self._start = {
            "wall": time.monotonic(),
            "loadavg": _loadavg(),
            "running": _other_running(),
            "busy": _busy_ticks(),
            "own": _own_cpu_s(),
        }
        return self

    def stop(self) -> dict[str, Any]:
        """Take the second snapshot; return the load between the two as a dict.

        Keys: ``loadavg_before``/``loadavg_after`` (1, 5, 15 minutes),
        ``other_running_before``/``other_running_after`` (other processes in state
        R), ``other_cpu_share`` (the share of all CPUs' time used by other
        processes, 0..1), ``cores`` and ``seconds`` (wall time in between).
        """
        if self._start is None:
            self.start()
        assert self._start is not None
        first = self._start
        seconds = max(time.monotonic() - first["wall"], 1e-9)
        busy, cores = _busy_ticks(), os.cpu_count() or 1
        share = None
        if busy is not None and first["busy"] is not None:
            busy_s = (busy - first["busy"]) / os.sysconf("SC_CLK_TCK")
            others = max(busy_s - (_own_cpu_s() - first["own"]), 0.0)
            share = round(min(others / (seconds * cores), 1.0), 3)
        return {
            "loadavg_before": first["loadavg"],
            "loadavg_after": _loadavg(),
            "other_running_before": first["running"],
            "other_running_after": _other_running(),
            "other_cpu_share": share,
            "cores": cores,
            "seconds": round(seconds, 3),
        }


def merge_loads(loads: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One load for consecutive runs: the first's start, the last's end, the other
    processes' CPU share weighted by each run's time."""
    known = [x for x in loads if isinstance(x, dict)]
    if not known:
        return None
    if len(known) == 1:
        return dict(known[0])
    first, last = known[0], known[-1]
    timed = [
        (x["other_cpu_share"], x.get("seconds") or 0.0)
        for x in known
        if x.get("other_cpu_share") is not None
    ]
    total = sum(s for _, s in timed)
    share = round(sum(v * s for v, s in timed) / total, 3) if total else None
    return {
        "loadavg_before": first.get("loadavg_before"),
        "loadavg_after": last.get("loadavg_after"),
        "other_running_before": first.get("other_running_before"),
        "other_running_after": last.get("other_running_after"),
        "other_cpu_share": share,
        "cores": first.get("cores"),
        "seconds": round(sum(x.get("seconds") or 0.0 for x in known), 3),
    }


def checked_environment(value: Any) -> dict[str, Any] | None:
    """``value`` if it can be a result's environment (a dict, or None), else a
    ``BenchmarkTypeError``."""
    if value is not None and not isinstance(value, dict):
        raise BenchmarkTypeError(
            "BenchmarkResult: environment must be a dict with 'machine' and "
            f"'load', or None; got {type(value).__name__}: {value!r}."
        )
    return value


def merge_environments(envs: Iterable[dict[str, Any] | None]) -> dict | None:
    """One environment for results measured one after another: the first one's
    machine, the load from the first start to the last end (None if none)."""
    known = [e for e in envs if e]
    if not known:
        return None
    loads = [e.get("load") for e in known]
    return {"machine": known[0].get("machine"), "load": merge_loads(loads)}


def describe_machine(machine: dict[str, Any]) -> str:
    """One sentence naming the machine: CPU, cores, GPUs and library versions.

    Example:
        >>> from polykernel.benchmark.machine import describe_machine
        >>> describe_machine({"cpu": "Xeon", "cores": 2, "gpus": [],
        ...                   "versions": {"jax": "0.10.2", "scipy": None}})
        'machine: Xeon, 2 logical CPUs, no GPU visible to JAX; jax 0.10.2'
    """
    cores = machine.get("cores")
    gpus = machine.get("gpus") or []
    parts = [str(machine.get("cpu") or "unknown CPU")]
    if cores:
        parts.append(f"{cores} logical CPU{'s' if cores != 1 else ''}")
    parts.append(", ".join(gpus) if gpus else "no GPU visible to JAX")
    versions = machine.get("versions") or {}
    libs = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    return "machine: " + ", ".join(parts) + (f"; {libs}" if libs else "")


def describe_load(load: dict[str, Any]) -> str:
    """One sentence on the load a run met, and whether its times are comparable.

    Example:
        >>> from polykernel.benchmark.machine import describe_load
        >>> load = {"loadavg_before": [0.4, 0.5, 0.6],
        ...         "loadavg_after": [1.1, 0.7, 0.6], "other_cpu_share": 0.03,
        ...         "other_running_before": 0, "other_running_after": 1,
        ...         "cores": 2, "seconds": 30.0}
        >>> describe_load(load)  # doctest: +NORMALIZE_WHITESPACE
        'load: 1-min load average 0.4 before, 1.1 after; other processes used 3% of
         the 2 CPUs for 30 s (0 running at the start, 1 at the end): a quiet machine'
    """
    before, after = load.get("loadavg_before"), load.get("loadavg_after")
    parts = []
    if before and after:
        parts.append(f"1-min load average {before[0]:g} before, {after[0]:g} after")
    share = load.get("other_cpu_share")
    verdict = ""
    if share is not None:
        cores = load.get("cores") or 1
        text = (
            f"other processes used {share:.0%} of the {cores} CPU"
            f"{'s' if cores != 1 else ''} for {load.get('seconds', 0):.0f} s"
        )
        r0, r1 = load.get("other_running_before"), load.get("other_running_after")
        if r0 is not None and r1 is not None:
            text += f" ({r0} running at the start, {r1} at the end)"
        parts.append(text)
        verdict = (
            ": measured under load, compare with care"
            if share > BUSY_SHARE
            else ": a quiet machine"
        )
    return "load: " + ("; ".join(parts) or "not recorded") + verdict


def environment_lines(environment: dict[str, Any] | None, width: int = 100) -> str:
    """The machine and load of a run as header lines, each at most ``width`` wide."""
    if not environment:
        return ""
    sentences = []
    if environment.get("machine"):
        sentences.append(describe_machine(environment["machine"]))
    if environment.get("load"):
        sentences.append(describe_load(environment["load"]))
    return "\n".join(
        textwrap.fill(s, width=width, subsequent_indent="  ") for s in sentences
    )
