"""``BackendKernel``: the core's half of every kernel wrapper's call.

``numba_kernel(...)``, ``warp_kernel(...)``, ``triton_kernel(...)``,
``pallas_kernel(...)``, ``numba_cuda_kernel(...)``, the functions of a native module,
and any out-of-tree backend's wrapper return a subclass of :class:`BackendKernel`.
The base class does what every backend must do the same way:

1. when the wrapper is made: the declared ``platforms``
   (:func:`~.backend_fields.check_platforms`) and ``parameters``
   (:func:`~.parameters.checked`), each refused naming the kernel's class and the
   allowed values; ``outs`` (:func:`~.outs.normalize_outs`), each output's
   dtype against the backend's declared ``out_dtypes`` (one
   ``UnsupportedDtypeError``), ``input_output_aliases`` and ``vmap_method``
   (:mod:`.options`, one default);
2. when it is called: ``outs`` of a kernel that takes them per call, inputs become
   arrays, keywords are bound to the declared :class:`~.parameters.Parameters`
   (unknown or missing: one ``KernelCallError``; for an out-of-tree backend's
   kernel it names the backend, which must declare the parameters its kernels
   take), every value goes through the one
   refusing converter (:func:`~.scalars.convert_scalars`: a declared dtype, the one
   the backend's rule infers in :meth:`BackendKernel.infer_dtype`, or a static
   value), aliases are checked against the inputs, and a launch that runs nothing
   gives zero (or aliased) outputs instead of uninitialised memory;
3. it picks the path: the platform of the ``XLACustomKernel`` lowering that traces it,
   else the kernel's only path, else — with a GPU visible and a CPU and a GPU path —
   ``jax.lax.platform_dependent`` (the data's device decides), else the default
   device's platform;
4. eager calls run through a small per-kernel cache of jitted functions, keyed by
   shapes, dtypes, scalar values and the default platform;
5. what the backend's ``emit`` and ``translate_error`` return is checked
   (:mod:`.hooks`): one array per output of ``outs``, of its shape and dtype; an
   exception or None. Anything else is a ``BackendHookError`` naming the hook.

A backend subclass *declares* its ``parameters``, ``out_dtypes`` and (for inferred
parameters) its dtype rule :meth:`~BackendKernel.infer_dtype`; it supplies
:meth:`~BackendKernel.emit` (build or fetch its artefact — through the one
"signature -> target" memo, :meth:`~BackendKernel.built` — register its targets
through :mod:`polykernel.ffi.targets`, emit the call) and, as needed,
:meth:`~BackendKernel.prepare` and :meth:`~BackendKernel.launches_nothing`. It never
overrides ``__call__`` or ``convert_scalars``: the rules are the base class's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..errors import (
    KernelCallError,
    KernelCompilationError,
    UnsupportedDtypeError,
    UnsupportedOperationError,
)
from ..platforms import Platform
from .backend_fields import check_platforms
from .collecting import fewer_collections
from .hooks import checked_emitted, translated_error
from .memo import BuildMemo
from .options import check_alias_inputs, check_aliases, resolve_vmap_method
from .outs import PER_CALL, OutSpec, as_array, normalize_outs
from .parameters import INFERRED, STATIC, Parameter, Parameters, bind_keywords, checked
from .platform_context import current_platform, gpu_visible, lowering_platform
from .scalars import Scalars, check_names, convert_scalars, inferred_dtype

__all__ = ["BackendKernel"]

_EAGER_CACHE_SIZE = 64
_NOT_GIVEN = object()


class BackendKernel:
    """Base of the callables kernel wrappers return (see the module docstring).

    Args:
        kind: the wrapper's name, for messages (``"warp_kernel"``).
        name: the kernel's name, for messages.
        outs: one ``ShapeDtypeStruct``-like or a pytree of them;
            :data:`~.outs.PER_CALL` for a kernel whose calls pass ``outs=``.
        platforms: the platforms this kernel has a path for.
        vmap_method: see :mod:`polykernel.contract.options`.
        input_output_aliases: ``{input index: output index}``.
        parameters: its keyword parameters (:class:`~.parameters.Parameters`, or a
            mapping ``name -> dtype name | INFERRED | STATIC``); None: it takes no
            keywords.
        out_dtypes: the dtype names its outputs may have (the technology's rule);
            None: any dtype.

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
        parameters: Parameters | Mapping[str, Any] | None = None,
        out_dtypes: Collection[str] | None = None,
    ) -> None:
        self.name = name
        self.where = f"{kind} '{name}'"
        # What the backend declared is refused here, naming its class, not at the
        # first call (or, for a platform, at the first lowering).
        declared_by = f"{self.where} ({_class_name(self)}, backend {self.backend!r})"
        self.platforms = check_platforms(declared_by, platforms, "a kernel")
        self.parameters = checked(declared_by, parameters)
        self._plugin = _plugin(self)
        self.out_dtypes = None if out_dtypes is None else tuple(out_dtypes)
        self.outs = (
            None
            if outs is PER_CALL
            else normalize_outs(self.where, outs, self.check_dtype)
        )
        self.out_specs: tuple[Any, ...] = () if self.outs is None else self.outs.structs
        n_outputs = len(self.out_specs) if self.outs is not None else 1 << 30
        self.aliases = check_aliases(self.where, input_output_aliases, n_outputs)
        self.vmap_method = resolve_vmap_method(self.where, vmap_method, self.aliases)
        self._eager: dict[Any, Callable[..., Any]] = {}
        self._eager_lock = threading.Lock()
        self._targets = BuildMemo()
        # The platform of the lowering that made this kernel: a sharded call may
        # trace it later, during partitioning, outside that lowering.
        self._built_for = lowering_platform()

    def __repr__(self) -> str:
        return f"{self.where.split(' ')[0]}({self.name}, outs={list(self.out_specs)})"

    # -- what a backend provides ------------------------------------------------------
    def infer_dtype(self, value: Any) -> Any:
        """The backend's dtype rule for an :data:`~.parameters.INFERRED` parameter:
        the dtype ``value`` gets (None: it has none, and the value is refused). The
        default: ``bool``; a Python ``int`` int64, a ``float`` float64; a NumPy
        scalar keeps its dtype."""
        return inferred_dtype(value)

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
        """The converted scalars as a hashable key of the eager cache (a static
        value keys with its type: ``1`` and ``1.0`` are different values)."""
        return tuple(
            (n, v.dtype.str, v.item()) if isinstance(v, np.generic) else (n, type(v), v)
            for n, v in scalars
        )

    def translate_error(self, err: Exception) -> Exception | None:
        """An error of an eager call, as the backend wants it raised: an exception
        instance, or None to raise it as is (anything else, or raising here, is a
        ``BackendHookError`` keeping ``err``'s message)."""
        return None

    # -- the core ---------------------------------------------------------------------
    def check_dtype(self, what: str, dtype: Any) -> str:
        """``dtype``'s name, if the backend's ``out_dtypes`` rule takes it (a value
        that is no dtype is left to :func:`~.outs.to_struct`'s check).

        Raises:
            UnsupportedDtypeError: the backend cannot take it.
        """
        try:
            name = np.dtype(dtype).name
        except TypeError:
            return ""
        if self.out_dtypes is None or name in self.out_dtypes:
            return name
        raise UnsupportedDtypeError(
            f"{self.where}: {what} has dtype {name}, which the {self.backend} backend "
            f"cannot take; it takes {', '.join(self.out_dtypes)}. Use one of these "
            f"(cast with .astype), or a backend that takes {name}."
        )

    def built(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The one "signature -> target" memo: what ``build()`` made for ``key``
        (built once per key; bounded and thread-safe, :mod:`.memo`)."""
        return self._targets.get_or_build(key, build)

    def convert_scalars(
        self, scalars: Mapping[str, Any], n_inputs: int, n_outputs: int
    ) -> Scalars:
        """A call's keywords bound to the declared parameters (unknown or missing
        ones refused), then every value through the one refusing converter."""
        check_names(self.where, scalars)
        bound = bind_keywords(
            self.where, self.parameters, scalars, n_inputs, n_outputs, self._plugin
        )
        return convert_scalars(
            self.where, scalars, lambda n, v: self._dtype_of(bound[n], v)
        )

    def convert_values(self, values: Mapping[str, Any]) -> Scalars:
        """Values of named parameters through the same converter, without a call's
        presence checks (defaults a backend takes when its kernel is made)."""
        declared = {p.name: p for p in self.parameters.entries}
        other = Parameter("", STATIC)
        return convert_scalars(
            self.where, values, lambda n, v: self._dtype_of(declared.get(n, other), v)
        )

    def _dtype_of(self, param: Parameter, value: Any) -> Any:
        return self.infer_dtype(value) if param.dtype is INFERRED else param.dtype

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        """Run the kernel on ``args``; keywords are its parameters (and ``outs``
        for a kernel whose calls pass it)."""
        outs = self.outs
        if outs is None:
            outs = self._call_outs(keywords.pop("outs", _NOT_GIVEN))
        return self.run(args, keywords, outs)

    def _call_outs(self, outs: Any) -> OutSpec:
        if outs is _NOT_GIVEN:
            raise KernelCallError(
                f"{self.where}: missing keyword argument 'outs'; this kernel takes "
                f"its outputs per call: pass outs=jax.ShapeDtypeStruct(shape, dtype) "
                f"or a list of them, one per output."
            )
        spec = normalize_outs(self.where, outs, self.check_dtype)
        check_aliases(self.where, self.aliases, len(spec))  # now that outs are known
        return spec

    def run(self, args: Sequence[Any], scalars: dict[str, Any], outs: OutSpec) -> Any:
        """The call: arrays, scalars, then the traced or the cached eager path."""
        import jax.core

        arrays = tuple(as_array(self.where, i, a) for i, a in enumerate(args))
        values = self.convert_scalars(scalars, len(arrays), len(outs))
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
        # The one caller of the backend's emit: what it returns is checked here, and
        # the build it may run collects garbage less often (.collecting).
        with fewer_collections():
            result = self.emit(platform, arrays, scalars, outs)
        return checked_emitted(self, platform, result, outs)


def _class_name(kernel: BackendKernel) -> str:
    cls = type(kernel)
    return f"{cls.__module__}.{cls.__qualname__}"


def _plugin(kernel: BackendKernel) -> str | None:
    """How messages name an out-of-tree backend's kernel class (None: built in)."""
    if type(kernel).__module__.partition(".")[0] == "polykernel":
        return None
    name = f" {kernel.backend!r}" if kernel.backend else ""
    return f"out-of-tree backend{name} ({_class_name(kernel)})"


def _has_cpu_and_gpu(platforms: Sequence[Platform]) -> bool:
    return Platform.CPU in platforms and Platform.GPU in platforms
