"""``XLACustomKernel``'s measured dispatch: ``tune``, ``dispatch`` and their setup.

Kept apart from the wiring of :mod:`.primitive`. :meth:`TuningMixin._decide` gathers
what a decision needs — the call's key, the kernel table's plain data
(:meth:`KernelTable.registered`), the ``set_backend`` preference, the table's
entries — and hands it to :func:`polykernel.dispatch.decide`, the one place that
decides; ``tune`` runs :mod:`polykernel.tuning`. See ``docs/tuning.md``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _jax_compat as jc, backends
from ..dispatch import Call, Dispatch, Key, Registered, decide, make_key, table
from ..dispatch.agreement import View, agreed_view
from ..dispatch.key import device_identity
from ..dispatch.notices import notice
from ..errors import KernelTypeError
from ..settings.preferences import get_backend

__all__ = ["TuningMixin"]


class TuningMixin:
    """Measured dispatch of a primitive (mixed into ``XLACustomKernel``)."""

    name: str
    _table: Any
    _bucketer: Callable[..., Sequence[int]] | None = None

    # -- setup -----------------------------------------------------------------------
    def def_tune_key(self, fn: Callable[..., Sequence[int]]) -> None:
        """Bucket calls your own way: ``fn(*, ins, outs, **params)`` returns a tuple
        of ints (calls with equal tuples share a tuned entry; the nearest tuple is
        used when none is equal). Default: per input dimension ``ceil(log2(size))``.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.def_tune_key")
            >>> op.def_tune_key(lambda *, ins, outs, **params: (ins[0].shape[0] // 64,))
        """
        if not callable(fn):
            raise KernelTypeError(
                f"XLACustomKernel '{self.name}'.def_tune_key(): expected a function "
                f"fn(*, ins, outs, **params) -> tuple of ints (got "
                f"{type(fn).__name__}: {fn!r})."
            )
        self._bucketer = fn
        jc.bump_dispatch_epoch()

    def def_tuned_table(self, path: str | os.PathLike) -> None:
        """Use the tuned table at ``path`` (shipped with a library; read on first
        use) for this primitive. The user's own table (``polykernel tune``) wins.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.def_tuned_table")
            >>> op.def_tuned_table("/path/inside/my/package/tuned.json")
        """
        table.register_shipped(path, self.name)
        jc.bump_dispatch_epoch()

    def tunables(
        self, platform: str
    ) -> dict[str, tuple[tuple[str, tuple[Any, ...]], ...]]:
        """``{backend: ((parameter, candidate values), ...)}`` on ``platform``."""
        return {
            b: self._table.entry(platform, b).tune
            for b in self._table.backends(platform)
        }

    # -- deciding --------------------------------------------------------------------
    def _registered(self, platform: str) -> Registered:
        """This primitive's kernels on ``platform`` as dispatch sees them."""

        def identity(backend: str) -> str:
            def modules() -> tuple[str, ...]:  # asked only when not computed yet
                found = backends.lookup(backend)
                return tuple(found.modules) if found is not None else ()

            return self._table.identity(platform, backend, modules)

        return self._table.registered(platform, identity)

    def _decide(
        self,
        platform: str,
        avals: Sequence[Any],
        outs: Sequence[Any],
        params: Mapping[str, Any],
        backend: str | None,
    ) -> tuple[Any, Dispatch]:
        """The kernel entry and decision of one lowering (or a dry run of one)."""
        registered = self._registered(platform)
        view = self._job_view(platform, registered)
        key = self._key_of(platform, avals, outs, params)
        call = Call(key, backend, dict(params))
        entries = table.entries_for(self.name) if view is None else view.entries
        decision = decide(call, registered, get_backend(platform), entries)
        if view is not None:
            decision = dataclasses.replace(
                decision, agreed=view.origin, job_fallback=view.fallback
            )
        notice(decision, registered)
        return self._table.entry(platform, decision.backend), decision

    def _job_view(
        self, platform: str, registered: Registered | None = None
    ) -> View | None:
        """In a ``jax.distributed`` job, the table and device identity every
        process decides from (agreed at the first need; None: alone)."""
        if jc.distributed_job() is None:
            return None  # alone: nothing to agree on (and nothing to gather)
        return agreed_view(
            registered or self._registered(platform),
            lambda: table.entries_for(self.name),
            device_identity(platform),
        )

    def dispatch(
        self,
        *ins: Any,
        outs: Any,
        platform: str | None = None,
        backend: str | None = None,
        **kwargs: Any,
    ) -> Dispatch:
        """Which backend and launch parameters a call would use, and why, without
        running or compiling anything.

        Args:
            *ins: the inputs (arrays, or anything with ``shape`` and ``dtype``).
            outs: as for a call.
            platform: the platform lowered for (default: JAX's default backend).
            backend: as for a call (an explicit backend always wins).
            **kwargs: the call's static keywords.

        Returns:
            A :class:`~polykernel.dispatch.Dispatch`: ``backend``, ``params``
            (what the generator gets), ``reason`` (``explicit``, ``preference``,
            ``set_default``, ``exact``, ``nearest``, ``family``, ``saved_default``,
            ``default``), its precedence ``level``, the entry used and the stale
            entries skipped.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> from polykernel.catalog import scaled_add_p
            >>> x = jax.ShapeDtypeStruct((1000,), jnp.float32)
            >>> scaled_add_p.dispatch(x, x, outs=x, alpha=2.0).reason in (
            ...     "exact", "nearest", "family", "saved_default", "default")
            True
        """
        from ..contract.outs import normalize_outs

        if platform is None:
            platform = jc.default_device_platform()
        spec = normalize_outs(f"XLACustomKernel '{self.name}'.dispatch()", outs)
        return self._decide(platform, ins, spec.structs, kwargs, backend)[1]

    # -- tuning ----------------------------------------------------------------------
    def tune(
        self,
        *,
        platform: str | Sequence[str] | None = None,
        configs: Sequence[Any] | None = None,
        backends: Sequence[str] | None = None,
        max_seconds: float = 120.0,
        max_candidates: int | None = None,
        save: bool = True,
        verbose: bool = False,
        rtol: float | None = None,
        atol: float | None = None,
        target_spread: float = 0.05,
        case_seconds: float = 2.0,
        passes: int = 2,
        contention: bool = False,
    ) -> Any:
        """Time every (backend, launch parameters) on each case; keep the fastest.

        Cases are the primitive's benchmark data (``def_benchmark_data``) or
        ``configs`` (``BenchmarkConfig``s you make, for the shapes you name), on
        ``platform`` (default: every platform with kernels and a device here).
        Candidates run on fresh copies of the case's inputs (never inside a traced
        program). One whose outputs differ from the reference's (``jax_raw``, else
        the default) beyond the per-dtype tolerance, or that writes into its
        inputs, is a ``mismatch``: reported, never chosen; one that fails is
        recorded and skipped; one whose first call does not return within its share
        of ``max_seconds`` is abandoned (``timeout``). The winner is the default
        unless a candidate is faster beyond the measured spread (see
        ``docs/tuning.md``). With ``save`` the winners go to your tuned table, and
        calls lowered afterwards use them.

        Every argument is checked before anything runs; with ``save``, so is the
        table it will write.

        Args:
            platform: a platform, a list of them, or None for all present.
            configs: the cases, a list of ``BenchmarkConfig`` (default: the
                benchmark data).
            backends: a list of backend names to tune (default: all registered and
                usable).
            max_seconds: the whole run's time budget (> 0): no candidate starts
                after it, and a first call that outlasts its share is abandoned.
            max_candidates: at most this many candidates per case (>= 1; the others
                are not tried, and not written).
            save: record the winners in the user's tuned table.
            verbose: print the report as it goes.
            rtol: the relative tolerance (default: the per-dtype one of
                ``polykernel.testing.tolerance_for``).
            atol: the absolute tolerance (default: the per-dtype one).
            target_spread: timing stops once every candidate's IQR / median is
                below this (or ``case_seconds`` is spent).
            case_seconds: timing budget of one case in one pass.
            passes: how many times every case is timed, each pass after all the
                cases had the previous one, so a choice holds across the states
                a shared machine passes through (see ``polykernel.tuning.timing``).
            contention: time one more pass with the machine's other cores busy,
                and prefer, among candidates tied on the idle machine, the one
                that holds up under that load.

        Returns:
            A :class:`~polykernel.tuning.report.TuneReport`.

        Raises:
            TuningTypeError: an argument of the wrong type.
            TuningValueError: an argument out of range, an unknown or repeated
                platform or backend.
            TuningError: called inside a traced function, no cases, no platform,
                or (with ``save``) a tuned table that cannot be written.
        """
        from ..tuning.session import run_tuning

        return run_tuning(
            self,
            platform=platform,
            configs=configs,
            backends=backends,
            max_seconds=max_seconds,
            max_candidates=max_candidates,
            save=save,
            verbose=verbose,
            rtol=rtol,
            atol=atol,
            target_spread=target_spread,
            case_seconds=case_seconds,
            passes=passes,
            contention=contention,
            key_of=self._key_of,
            registered=self._registered,
        )

    def _key_of(
        self, platform: str, avals: Sequence[Any], outs: Any, statics: Mapping[str, Any]
    ) -> Key:
        """The tuned-table key of a call: its launch parameters are not part of it
        (they are what the entry decides)."""
        names = {
            n for b in self._table.backends(platform)
            for n in self._table.entry(platform, b).tunable_names
        }  # fmt: skip
        view = self._job_view(platform)
        return make_key(
            self.name, platform, avals, outs, statics, self._bucketer, names,
            None if view is None else view.device,
        )  # fmt: skip
