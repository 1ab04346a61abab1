"""``XLACustomKernel``: one JAX primitive backed by kernels from many technologies.

The class owns a JAX ``Primitive`` (multiple results), a :class:`KernelTable` of
kernel generators per platform and backend, and the primitive's transformation rules.
All JAX rule tables are written in the wiring block of ``__init__`` (through
``_jax_compat``); everything else is bookkeeping.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _jax_compat as jc
from ..contract.keywords import check_keywords
from ..contract.outs import as_array, normalize_outs
from ..errors import (
    KernelRegistrationError,
    KernelTypeError,
    UnknownBackendError,
)
from ..platforms import PLATFORMS, lowering_platforms
from ..sharding import rules as sharding
from ..types import Outs, PlatformName
from . import registry
from .kernel_table import KernelTable
from .lowering import make_lowering_rule
from .primitive_info import CatalogMixin
from .registration import RegistrationMixin, check_platform, check_platform_type
from .transforms import defjvp, general_batching_rule
from .tuning_methods import TuningMixin

__all__ = ["XLACustomKernel"]


class XLACustomKernel(RegistrationMixin, TuningMixin, CatalogMixin):
    """A JAX primitive whose implementation is chosen per platform and backend.

    Register kernel generators with :meth:`def_kernel` (or a ``def_<backend>_kernel``
    shorthand), optionally add transformation rules, then call the instance with
    inputs and an ``outs`` description. The first kernel registered for a platform
    becomes its default.

    Attributes:
        name: The primitive's name (also its key in the global registry).
        primitive: The underlying ``jax.extend.core.Primitive``.

    Example:
        >>> import jax, jax.numpy as jnp, polykernel as pk
        >>> op = pk.XLACustomKernel("doc.double")
        >>> op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: 2 * x)
        >>> op(jnp.arange(3.0), outs=jax.ShapeDtypeStruct((3,), jnp.float32))
        Array([0., 2., 4.], dtype=float32)
    """

    def __init__(self, name: str, doc: str | None = None) -> None:
        if not isinstance(name, str):
            raise KernelTypeError(
                f"XLACustomKernel(name=...): name must be a string (got "
                f"{type(name).__name__}: {name!r}), e.g. "
                f"XLACustomKernel('mylib.csrmv')."
            )
        if not name:
            raise KernelRegistrationError(
                "XLACustomKernel(name=...): name must be a non-empty string, e.g. "
                "XLACustomKernel('mylib.csrmv')."
            )
        self.name = name
        self.__doc__ = doc or type(self).__doc__
        self._table = KernelTable(name)
        self._tags: tuple[str, ...] = ()
        self._call_fn: Callable[..., Any] | None = None
        self._benchmark_data_fn: Callable[..., Any] | None = None

        # -- wiring block: every JAX rule table this primitive touches --------------
        jc.ensure_dispatch_epoch()
        self.primitive = jc.Primitive(name)
        self.primitive.multiple_results = True
        self.primitive.def_impl(functools.partial(jc.apply_primitive, self.primitive))
        self.primitive.def_abstract_eval(_abstract_eval)
        for platform in PLATFORMS:
            rule = make_lowering_rule(name, self._table, platform, self._decide)
            for lowering in lowering_platforms(platform):
                jc.register_lowering(self.primitive, rule, platform=lowering.value)
        self.register_general_batching()
        registry.register(self)

    def __repr__(self) -> str:
        return f"XLACustomKernel({self.name!r}, defaults={self.defaults})"

    # -- calling -------------------------------------------------------------------
    def __call__(
        self, *ins: Any, outs: Outs, backend: str | None = None, **kwargs: Any
    ) -> Any:
        """Bind the primitive on ``ins``; return arrays shaped like ``outs``.

        Args:
            *ins: Input arrays (anything ``jnp.asarray`` accepts).
            outs: One ``jax.ShapeDtypeStruct``-like object or a pytree of them.
            backend: Use this backend instead of the platform's default.
            **kwargs: Static, hashable parameters forwarded to the kernel generator.

        Returns:
            One array per leaf of ``outs``, in the structure of ``outs``.
        """
        where = f"XLACustomKernel '{self.name}'"
        spec = normalize_outs(where, outs)
        check_keywords(where, kwargs)
        if backend is not None:
            self._check_backend_known(backend)
        arrays = [as_array(where, i, x) for i, x in enumerate(ins)]
        results = self.primitive.bind(
            *arrays, outs=spec.structs, backend=backend, **kwargs
        )
        return spec.unflatten(results)

    def _check_backend_known(self, backend: object) -> None:
        if not isinstance(backend, str):
            raise KernelTypeError(
                f"XLACustomKernel '{self.name}': backend must be a string or None "
                f"(got {type(backend).__name__}: {backend!r})."
            )
        known = {b for p in self._table.platforms() for b in self._table.backends(p)}
        if backend not in known:
            raise UnknownBackendError(
                f"XLACustomKernel '{self.name}': backend {backend!r} is not registered "
                f"on any platform (registered: "
                f"{ {p: self._table.backends(p) for p in self._table.platforms()} }). "
                f"Pass one of those, or None for the platform default."
            )

    # -- defaults ------------------------------------------------------------------
    def set_default(self, platform: PlatformName, backend: str) -> None:
        """Make ``backend`` the default for ``platform`` (also for already-jitted code).

        Raises:
            KernelRegistrationError: (a ``ValueError``) nothing or not ``backend`` is
                registered for ``platform``.
        """
        check_platform(self.name, "set_default", platform, list(PLATFORMS))
        if not isinstance(backend, str):
            raise KernelTypeError(
                f"XLACustomKernel '{self.name}'.set_default(): backend must be a "
                f"string such as 'numba' (got {type(backend).__name__}: {backend!r})."
            )
        if self._table.set_default(platform, backend):
            jc.bump_dispatch_epoch()

    def get_default(self, platform: str) -> str | None:
        """Return the default backend of ``platform``, or ``None``."""
        check_platform_type(self.name, "get_default", platform)
        return self._table.default(platform)

    @property
    def defaults(self) -> dict[str, str]:
        """A copy of the default backend of every platform."""
        return self._table.defaults()

    def available_backends(self, platform: str) -> list[str]:
        """Backends registered for ``platform`` (empty list if none)."""
        check_platform_type(self.name, "available_backends", platform)
        return self._table.backends(platform)

    # -- transformation rules ------------------------------------------------------
    def def_batching_rule(self, fun: Callable[..., Any]) -> None:
        """Replace the vmap rule: ``fun(args, axes, **params) -> (outs, out_axes)``."""
        _check_callable(self.name, "def_batching_rule", fun)
        jc.set_batching_rule(self.primitive, fun)

    def register_general_batching(self) -> None:
        """Install (or restore) the default vmap rule, :func:`general_batching_rule`."""
        jc.set_batching_rule(
            self.primitive, functools.partial(general_batching_rule, self.primitive)
        )

    def def_jvp_rule(self, fun: Callable[..., Any]) -> None:
        """Set a whole JVP rule: ``fun(primals, tangents, **params)``."""
        _check_callable(self.name, "def_jvp_rule", fun)
        jc.set_jvp_rule(self.primitive, fun)

    def def_jvp_rule2(self, *jvp_rules: Callable[..., Any] | None) -> None:
        """Set one tangent rule per input (``None`` = no contribution); see defjvp."""
        defjvp(self.primitive, *jvp_rules)

    def def_transpose_rule(self, fun: Callable[..., Any]) -> None:
        """Set the transpose rule: ``fun(cotangents, *args, **params)``."""
        _check_callable(self.name, "def_transpose_rule", fun)
        jc.set_transpose_rule(self.primitive, fun)

    # -- sharding (see polykernel.sharding and docs/sharding.md) -----------------------
    def def_batch_partitioning(
        self, n_axes: int = 1, *, replicated_inputs: Sequence[int] = ()
    ) -> None:
        """Declare the call splittable along the leading ``n_axes`` of its arrays.

        Every output and every input not in ``replicated_inputs`` shares its leading
        ``n_axes`` dimensions: under ``jit`` with sharded operands each device runs
        the kernel once on its block (no all-gather). Other dimensions, and the
        replicated inputs, are whole on every device.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.batch_partitioning")
            >>> op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
            >>> op.def_batch_partitioning()
        """
        sharding.set_rule(
            self.primitive,
            sharding.batch_partitioning(self.name, n_axes, replicated_inputs),
        )

    def def_sharding_rule(
        self,
        rule: str | Callable[..., str],
        partition: Callable[..., Any] | None = None,
        *,
        need_replication: Sequence[str] = (),
    ) -> None:
        """Declare how the call partitions with a Shardy rule like ``"i j, j -> i"``.

        ``partition(shard, *blocks, outs, **params)`` computes one shard's outputs
        (default: the primitive on the blocks); ``need_replication`` names factors
        that are never split. See ``docs/sharding.md``.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.sharding_rule")
            >>> op.def_jax_raw_kernel(lambda outs, **kw: lambda a, x: a @ x)
            >>> op.def_sharding_rule("i j, j -> i", need_replication=("j",))
        """
        sharding.set_rule(
            self.primitive,
            sharding.sharding_rule(self.name, rule, partition, need_replication),
        )


def _check_callable(owner: str, method: str, fun: Any) -> None:
    if not callable(fun):
        raise KernelTypeError(
            f"XLACustomKernel '{owner}'.{method}(): expected a function (got "
            f"{type(fun).__name__}: {fun!r})."
        )


def _abstract_eval(*avals: Any, outs: tuple[Any, ...], **params: Any) -> list[Any]:
    return [jc.ShapedArray(o.shape, np.dtype(o.dtype)) for o in outs]
