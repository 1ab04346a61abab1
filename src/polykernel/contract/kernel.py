"""``BackendKernel``: the core's half of every kernel wrapper's call.

``numba_kernel(...)``, ``warp_kernel(...)``, ``triton_kernel(...)``,
``pallas_kernel(...)``, ``numba_cuda_kernel(...)``, the functions of a native module,
and any out-of-tree backend's wrapper return a subclass of :class:`BackendKernel`.
The base class does what every backend must do the same way:

1. when the wrapper is made: ``outs`` (:func:`~.outs.normalize_outs`),
   ``input_output_aliases`` and ``vmap_method`` (:mod:`.options`, one default);
2. when it is called: inputs become arrays, every scalar keyword goes through the one
   refusing converter (:func:`~.scalars.convert_scalars`, with the dtype the backend
   declares or infers in :meth:`BackendKernel.scalar_dtype`), aliases are checked
   against the inputs, and a launch that runs nothing gives zero (or aliased) outputs
   instead of uninitialised memory;
3. it picks the path: the platform of the ``XLACustomKernel`` lowering that traces it,
   else the kernel's only path, else — with a GPU visible and a CPU and a GPU path —
   ``jax.lax.platform_dependent`` (the data's device decides), else the default
   device's platform;
4. eager calls run through a small per-kernel cache of jitted functions, keyed by
   shapes, dtypes, scalar values and the default platform;
5. what the backend's ``emit`` and ``translate_error`` return is checked
   (:mod:`.hooks`): one array per output of ``outs``, of its shape and dtype; an
   exception or None. Anything else is a ``BackendHookError`` naming the hook.

A backend subclass supplies :meth:`~BackendKernel.emit` (build or fetch its artefact,
register its targets through :mod:`polykernel.ffi.targets`, emit the call) and, as
needed, :meth:`~BackendKernel.scalar_dtype`, :meth:`~BackendKernel.prepare` and
:meth:`~BackendKernel.launches_nothing`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ..errors import KernelCallError, KernelCompilationError, UnsupportedOperationError
from ..platforms import Platform
from .hooks import checked_emitted, translated_error
from .options import check_alias_inputs, check_aliases, resolve_vmap_method
from .outs import PER_CALL, OutSpec, as_array, normalize_outs
from .platform_context import current_platform, gpu_visible, lowering_platform
from .scalars import Scalars, convert_scalars

__all__ = ["BackendKernel"]

_EAGER_CACHE_SIZE = 64


class BackendKernel:
    """Base of the callables kernel wrappers return (see the module docstring).

    Args:
        kind: the wrapper's name, for messages (``"warp_kernel"``).
        name: the kernel's name, for messages.
        outs: one ``ShapeDtypeStruct``-like or a pytree of them;
            :data:`~.outs.PER_CALL` for a kernel whose calls pass ``outs`` (then
            :meth:`run` gets it per call).
        platforms: the platforms this kernel has a path for.
        vmap_method: see :mod:`polykernel.contract.options`.
        input_output_aliases: ``{input index: output index}``.
        check_dtype: refuses output dtypes the backend cannot take.

    Attributes:
        where: ``"<kind> '<name>'"``, the prefix of every message.
        outs: the normalised :class:`~.outs.OutSpec` (None: given per call).
        out_specs: its structs (empty when given per call).
        aliases: the checked alias mapping (``{}`` for none).
        vmap_method: the resolved method (never None).
    """

    #: The backend's name (a key of the backend table).
    backend: ClassVar[str] = ""
    #: What a flat list/tuple of ``outs`` comes back as (None: the same pytree).
    sequence: ClassVar[type | None] = tuple

    def __init__(
        self,
        kind: str,
        name: str,
        outs: Any,
        *,
        platforms: Sequence[str],
        vmap_method: object = None,
        input_output_aliases: object = None,
        check_dtype: Callable[[str, Any], object] | None = None,
    ) -> None:
        self.name = name
        self.where = f"{kind} '{name}'"
        self.platforms = tuple(Platform(p) for p in platforms)
        self.outs = (
            None if outs is PER_CALL else normalize_outs(self.where, outs, check_dtype)
        )
        self.out_specs: tuple[Any, ...] = () if self.outs is None else self.outs.structs
        n_outputs = len(self.out_specs) if self.outs is not None else 1 << 30
        self.aliases = check_aliases(self.where, input_output_aliases, n_outputs)
        self.vmap_method = resolve_vmap_method(self.where, vmap_method, self.aliases)
        self._eager: dict[Any, Callable[..., Any]] = {}
        self._eager_lock = threading.Lock()
        # The platform of the lowering that made this kernel: a sharded call may
        # trace it later, during partitioning, outside that lowering.
        self._built_for = lowering_platform()

    def __repr__(self) -> str:
        return f"{self.where.split(' ')[0]}({self.name}, outs={list(self.out_specs)})"

    # -- what a backend provides ------------------------------------------------------
    def scalar_dtype(self, name: str, value: Any) -> Any:
        """The dtype of scalar keyword ``name`` (declared, or inferred from ``value``;
        None when ``value`` has none). The default takes no keywords.

        Raises:
            KernelCallError: the kernel has no such scalar parameter.
        """
        raise KernelCallError(
            f"{self.where}: takes no keyword arguments (got '{name}'); pass arrays as "
            f"inputs."
        )

    def prepare(self, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec) -> None:
        """Check a call (counts, dtypes, ranks) before anything is emitted."""

    def launches_nothing(self, arrays: Sequence[Any], scalars: Scalars) -> bool:
        """True when the call's launch runs no thread (its outputs are then zeros)."""
        return False

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> Sequence[Any]:
        """Emit the call on ``platform``: JAX values in, a list with one JAX array per
        output of ``outs`` (of its shape and dtype: checked, a ``BackendHookError``
        otherwise) out."""
        raise NotImplementedError

    def scalar_key(self, scalars: Scalars) -> Any:
        """The converted scalars as a hashable key of the eager cache."""
        return tuple((n, v.dtype.str, v.item()) for n, v in scalars)

    def translate_error(self, err: Exception) -> Exception | None:
        """An error of an eager call, as the backend wants it raised: an exception
        instance, or None to raise it as is (anything else, or raising here, is a
        ``BackendHookError`` keeping ``err``'s message)."""
        return None

    # -- the core ---------------------------------------------------------------------
    def convert_scalars(self, scalars: dict[str, Any]) -> Scalars:
        """Every scalar keyword through the one refusing converter."""
        return convert_scalars(self.where, scalars, self.scalar_dtype)

    def __call__(self, *args: Any, **scalars: Any) -> Any:
        """Run the kernel on ``args``; keywords are its scalar parameters."""
        assert self.outs is not None, "a kernel without outs overrides __call__"
        return self.run(args, scalars, self.outs)

    def run(self, args: Sequence[Any], scalars: dict[str, Any], outs: OutSpec) -> Any:
        """The call: arrays, scalars, then the traced or the cached eager path."""
        import jax.core

        arrays = tuple(as_array(self.where, i, a) for i, a in enumerate(args))
        values = self.convert_scalars(scalars)
        if any(isinstance(a, jax.core.Tracer) for a in arrays):
            return self.trace(*arrays, scalars=values, outs=outs)
        key = (
            tuple((a.shape, a.dtype) for a in arrays),
            self.scalar_key(values),
            outs.structs,
            current_platform(),
        )
        fn = self._eager.get(key)
        if fn is None:
            fn = jax.jit(functools.partial(self.trace, scalars=values, outs=outs))
            with self._eager_lock:
                if len(self._eager) >= _EAGER_CACHE_SIZE:
                    self._eager.pop(next(iter(self._eager)))
                self._eager[key] = fn
        try:
            return fn(*arrays)
        except Exception as err:
            translated = translated_error(self, err, self.translate_error)
            if translated is None:
                raise
            raise translated from err

    def trace(self, *arrays: Any, scalars: Scalars, outs: OutSpec) -> Any:
        """Emit the call for traced ``arrays``; results in the shape of ``outs``."""
        check_alias_inputs(self.where, self.aliases, len(arrays))
        self.prepare(arrays, scalars, outs)
        if self.launches_nothing(arrays, scalars):
            return outs.pack(self._empty_outputs(arrays, outs), self.sequence)
        return outs.pack(self._emit_on_path(arrays, scalars, outs), self.sequence)

    def _empty_outputs(self, arrays: Sequence[Any], outs: OutSpec) -> list[Any]:
        import jax.numpy as jnp

        inputs = {o: i for i, o in self.aliases.items()}
        return [
            arrays[inputs[j]] if j in inputs else jnp.zeros(s.shape, s.dtype)
            for j, s in enumerate(outs.structs)
        ]

    def _emit_on_path(
        self, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        platform = lowering_platform() or self._built_for
        if platform is None and len(self.platforms) == 1:
            platform = self.platforms[0]
        if platform is None and gpu_visible() and _has_cpu_and_gpu(self.platforms):
            import jax

            # Used on its own where JAX has a GPU: the data's device decides.
            def on(p: Platform) -> Callable[..., list[Any]]:
                return lambda *xs: self._emit(p, xs, scalars, outs)

            def on_gpu(*xs: Any) -> list[Any]:
                from .unavailable import unavailable_path

                try:
                    return self._emit(Platform.GPU, xs, scalars, outs)
                except KernelCompilationError as err:
                    # A GPU path this process cannot build must not fail CPU calls.
                    return unavailable_path(err, outs.structs)

            return list(
                jax.lax.platform_dependent(*arrays, cpu=on(Platform.CPU), cuda=on_gpu)
            )
        platform = Platform(platform or current_platform())
        if platform not in self.platforms:
            raise UnsupportedOperationError(
                f"{self.where}: no {platform} path; this kernel runs on "
                f"{[str(p) for p in self.platforms]}."
            )
        return self._emit(platform, arrays, scalars, outs)

    def _emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        # The one caller of the backend's emit: what it returns is checked here.
        result = self.emit(platform, arrays, scalars, outs)
        return checked_emitted(self, platform, result, outs)


def _has_cpu_and_gpu(platforms: Sequence[Platform]) -> bool:
    return Platform.CPU in platforms and Platform.GPU in platforms
