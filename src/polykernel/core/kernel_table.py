"""Which kernels a primitive has, per platform: a registry, nothing more.

A :class:`KernelTable` maps ``platform -> backend -> KernelEntry`` and keeps the
primitive's own default per platform: ``asdefault=True`` at registration, else the
first backend registered, or what ``set_default`` chose at run time. It does not
decide which kernel a call runs: :mod:`polykernel.dispatch` does, from
:meth:`KernelTable.registered`'s plain data (the precedence is stated once, in
``dispatch/precedence.py``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..dispatch.identity import kernel_identity
from ..dispatch.lookup import Registered
from ..errors import KernelRegistrationError

__all__ = ["KernelEntry", "KernelTable"]


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """One registered kernel: a generator for one backend on one platform.

    Attributes:
        backend: Kernel technology, e.g. ``'numba'``, ``'cuda_raw'``, ``'jax_raw'``.
        platform: Where it runs: ``'cpu'``, ``'gpu'`` or ``'tpu'``.
        kernel_generator: Called at lowering time with ``outs``, the call's keyword
            arguments and (if it declares an ``ins`` parameter) the input avals; returns
            a JAX-traceable function of the inputs.
        tune: Its launch parameters, ``((name, (candidate, ...)), ...)``, the first
            candidate of each the default; the generator gets one value of each.
    """

    backend: str
    platform: str
    kernel_generator: Callable[..., Callable[..., Any]]
    tune: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def tunable_names(self) -> tuple[str, ...]:
        """The names of its launch parameters (never part of a tuned key)."""
        return tuple(name for name, _ in self.tune)


class KernelTable:
    """Per-platform kernel entries and default backends of one primitive."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._entries: dict[str, dict[str, KernelEntry]] = {}
        self._defaults: dict[str, str] = {}
        self._runtime: dict[str, str] = {}  # set_default() choices
        self._identities: dict[tuple[str, str], str] = {}
        self._lock = threading.RLock()

    # -- registration ------------------------------------------------------------
    def add(self, entry: KernelEntry, asdefault: bool) -> None:
        with self._lock:
            per_platform = self._entries.setdefault(entry.platform, {})
            per_platform[entry.backend] = entry
            self._identities.pop((entry.platform, entry.backend), None)
            if asdefault or entry.platform not in self._defaults:
                self._defaults[entry.platform] = entry.backend
            if asdefault:  # a later asdefault=True wins over an earlier set_default
                self._runtime.pop(entry.platform, None)

    def set_default(self, platform: str, backend: str) -> bool:
        """Make ``backend`` the default of ``platform``; return True if it changed."""
        with self._lock:
            if platform not in self._entries:
                raise KernelRegistrationError(
                    f"XLACustomKernel '{self._owner}'.set_default(): no kernels are "
                    f"registered for platform '{platform}' (platforms with kernels: "
                    f"{self.platforms()}). Register one first, e.g. with "
                    f"def_kernel(backend, '{platform}', generator)."
                )
            if backend not in self._entries[platform]:
                raise KernelRegistrationError(
                    f"XLACustomKernel '{self._owner}'.set_default(): backend "
                    f"'{backend}' is not registered for platform '{platform}' "
                    f"(registered: {self.backends(platform)}). Pick one of those or "
                    f"register '{backend}' first."
                )
            # Against the run-time choice, not the default: set_default outranks
            # tuned entries, so choosing the registered default changes dispatch.
            changed = self._runtime.get(platform) != backend
            self._runtime[platform] = backend
            return changed

    # -- queries -----------------------------------------------------------------
    def platforms(self) -> list[str]:
        return sorted(self._entries)

    def backends(self, platform: str) -> list[str]:
        return list(self._entries.get(platform, {}))

    def default(self, platform: str) -> str | None:
        """The primitive's own default: ``set_default``'s choice, else
        ``asdefault=True``'s, else the first registered (None: no kernel)."""
        return self._runtime.get(platform, self._defaults.get(platform))

    def defaults(self) -> dict[str, str]:
        return {p: b for p in self._defaults if (b := self.default(p)) is not None}

    def entry(self, platform: str, backend: str) -> KernelEntry:
        """The entry of ``backend`` on ``platform`` (it must be registered)."""
        return self._entries[platform][backend]

    def identity(
        self, platform: str, backend: str, modules: Callable[[], Sequence[str]]
    ) -> str:
        """The identity of a registered kernel (:mod:`polykernel.dispatch.identity`),
        computed on first use — with its backend's package names from
        ``modules()`` — and kept until the backend is registered again."""
        key = (platform, backend)
        with self._lock:
            found = self._identities.get(key)
        if found is None:
            entry = self.entry(platform, backend)
            found = kernel_identity(entry.kernel_generator, entry.tune, modules())
            with self._lock:
                self._identities[key] = found
        return found

    def registered(self, platform: str, identity: Callable[[str], str]) -> Registered:
        """This table's kernels on ``platform`` as the plain data dispatch decides
        over (``identity(backend)``: a registered kernel's identity)."""
        with self._lock:
            per_platform = dict(self._entries.get(platform, {}))
            return Registered(
                self._owner,
                platform,
                {b: e.tune for b, e in per_platform.items()},
                self._defaults.get(platform, ""),
                self._runtime.get(platform),
                identity,
                tuple(self.platforms()),
            )
