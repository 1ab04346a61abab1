"""Which kernels a primitive has, per platform, and which one each platform uses.

A :class:`KernelTable` maps ``platform -> backend -> KernelEntry`` and keeps one
default backend per platform. The backend a call runs, highest precedence first:

1. the call's ``backend=`` argument (an unregistered name raises
   :class:`~polykernel.errors.UnknownBackendError`);
2. the process-wide ``polykernel.set_backend(platform, backend)`` choice, if this
   primitive registered that backend for the platform; otherwise it is ignored for
   this primitive, with one :class:`~polykernel.errors.BackendPreferenceWarning`;
3. ``set_default(platform, backend)`` called at run time;
4. the measured dispatch of ``tune()`` (per device and shape: :mod:`.dispatch`,
   applied by the lowering over this table's choice when it is of level 5 or 6);
5. a tuned default persisted by ``polykernel benchmark --save-defaults`` (applied the
   first time the table is asked, and only if that backend is registered here);
6. ``asdefault=True`` at registration, else the first backend registered.

:meth:`KernelTable.default` answers levels 3, 5 and 6 (the primitive's own
default); :meth:`KernelTable.resolve_with_reason` applies 1-3, 5 and 6 and says
which decided. A platform with no kernel raises
:class:`~polykernel.errors.KernelFallbackExhaustedError`, as the reference does.
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import (
    BackendPreferenceWarning,
    KernelFallbackExhaustedError,
    KernelRegistrationError,
    UnknownBackendError,
)
from ..settings.preferences import get_backend

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
        tune: Its tunable launch parameters, ``((name, (candidate, ...)), ...)``;
            the generator also gets one value of each (see ``core/dispatch.py``).
    """

    backend: str
    platform: str
    kernel_generator: Callable[..., Callable[..., Any]]
    tune: tuple[tuple[str, tuple[Any, ...]], ...] = ()


class KernelTable:
    """Per-platform kernel entries and default backends of one primitive."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._entries: dict[str, dict[str, KernelEntry]] = {}
        self._defaults: dict[str, str] = {}
        self._runtime_choice: set[str] = set()  # platforms set via set_default()
        self._tuned: dict[str, str] | None = None  # persisted choices, read lazily
        self._warned: set[tuple[str, str]] = set()  # (platform, ignored set_backend)
        self._lock = threading.RLock()

    # -- registration ------------------------------------------------------------
    def add(self, entry: KernelEntry, asdefault: bool) -> None:
        with self._lock:
            per_platform = self._entries.setdefault(entry.platform, {})
            per_platform[entry.backend] = entry
            if asdefault or entry.platform not in self._defaults:
                self._defaults[entry.platform] = entry.backend

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
            changed = self.default(platform) != backend
            self._runtime_choice.add(platform)
            self._defaults[platform] = backend
            return changed

    # -- queries -----------------------------------------------------------------
    def platforms(self) -> list[str]:
        return sorted(self._entries)

    def backends(self, platform: str) -> list[str]:
        return list(self._entries.get(platform, {}))

    def default(self, platform: str) -> str | None:
        if platform not in self._runtime_choice:
            tuned = self._tuned_defaults().get(platform)
            if tuned is not None and tuned in self._entries.get(platform, {}):
                return tuned
        return self._defaults.get(platform)

    def defaults(self) -> dict[str, str]:
        return {p: b for p in self._defaults if (b := self.default(p)) is not None}

    def entry(self, platform: str, backend: str) -> KernelEntry:
        """The entry of ``backend`` on ``platform`` (it must be registered)."""
        return self._entries[platform][backend]

    def resolve(self, platform: str, backend: str | None) -> KernelEntry:
        """Return the entry a call on ``platform`` uses (see the module docstring)."""
        return self.resolve_with_reason(platform, backend)[0]

    def resolve_with_reason(
        self, platform: str, backend: str | None
    ) -> tuple[KernelEntry, str]:
        """The entry a call on ``platform`` uses and why: ``explicit``
        (``backend=``), ``preference`` (``set_backend``), ``set_default`` (run-time
        choice) or ``default`` (persisted, ``asdefault`` or first registered: the
        only reason measured dispatch may override)."""
        per_platform = self._entries.get(platform)
        if not per_platform:
            raise KernelFallbackExhaustedError(
                f"XLACustomKernel '{self._owner}' has no kernel for platform "
                f"'{platform}' (platforms with kernels: {self.platforms()}). Register "
                f"one with def_kernel(backend, '{platform}', generator), or run on one "
                f"of those platforms."
            )
        if backend is not None:
            if backend not in per_platform:
                raise UnknownBackendError(
                    f"XLACustomKernel '{self._owner}': backend '{backend}' is not "
                    f"registered for platform '{platform}' (registered: "
                    f"{list(per_platform)}). Pass one of those as backend=..., or "
                    f"register '{backend}' for '{platform}'."
                )
            return per_platform[backend], "explicit"
        preferred = get_backend(platform)
        if preferred is not None:
            if preferred in per_platform:
                return per_platform[preferred], "preference"
            self._warn_preference_ignored(platform, preferred)
        default = self.default(platform)
        assert default is not None  # the first kernel of a platform is its default
        how = "set_default" if platform in self._runtime_choice else "default"
        return per_platform[default], how

    def _warn_preference_ignored(self, platform: str, preferred: str) -> None:
        with self._lock:
            if (platform, preferred) in self._warned:
                return
            self._warned.add((platform, preferred))
        warnings.warn(
            f"polykernel.set_backend('{platform}', '{preferred}') does not apply to "
            f"XLACustomKernel '{self._owner}': it registered "
            f"{self.backends(platform)} for '{platform}'. Using its default "
            f"'{self.default(platform)}' instead (warned once).",
            BackendPreferenceWarning,
            stacklevel=2,
        )

    def _tuned_defaults(self) -> dict[str, str]:
        # Read once, lazily, so that importing or defining a primitive never touches
        # the disk; a later `polykernel defaults clear` takes effect in new processes.
        if self._tuned is None:
            from ..settings.tuned_defaults import load_defaults

            self._tuned = dict(load_defaults().get(self._owner, {}))
        return self._tuned
