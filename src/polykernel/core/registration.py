"""How kernels join a primitive: ``def_kernel``, its per-backend shorthands, ``tune``.

Mixed into :class:`~polykernel.core.primitive.XLACustomKernel`: each shorthand
(``def_numba_kernel``, ``def_pallas_kernel``, ...) is ``def_kernel`` with the
backend (and platform) filled in, as the reference API has them. ``tune`` (our
addition) declares a generator's launch parameters and their candidate values:
:func:`check_tune` normalises it to ``((name, (value, ...)), ...)`` in declared
order, the first value of each being the default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import _jax_compat as jc
from ..contract.keywords import RESERVED_KEYWORDS
from ..errors import KernelRegistrationError, KernelTypeError, UnsupportedPlatformError
from ..platforms import PLATFORMS
from ..types import KernelGenerator, PlatformName
from .kernel_table import KernelEntry, KernelTable

__all__ = ["RegistrationMixin", "check_platform", "check_platform_type", "check_tune"]

#: What ``tune=`` takes: ``{parameter name: candidate values}``, or None.
Tune = Mapping[str, Sequence[Any]] | None


def check_platform_type(
    owner: str, method: str, platform: Any, allowed: Sequence[str] = ()
) -> None:
    if not isinstance(platform, str):
        raise KernelTypeError(
            f"XLACustomKernel '{owner}'.{method}(): platform must be a string, one of "
            f"{list(allowed or PLATFORMS)} (got {type(platform).__name__}: "
            f"{platform!r})."
        )


def check_platform(
    owner: str,
    method: str,
    platform: Any,
    allowed: Sequence[str],
    error: type[KernelRegistrationError] = KernelRegistrationError,
) -> None:
    check_platform_type(owner, method, platform, allowed)
    if platform not in allowed:
        raise error(
            f"XLACustomKernel '{owner}'.{method}(): platform must be one of "
            f"{list(allowed)} (got {platform!r})."
        )


def check_tune(owner: str, tune: Any) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``tune`` as ``((name, (value, ...)), ...)``, checked.

    Raises:
        KernelTypeError: not a mapping of names to sequences of hashable values.
        KernelRegistrationError: a name that is not an identifier or is reserved,
            or a parameter without candidates.
    """
    if tune is None:
        return ()
    where = f"XLACustomKernel '{owner}'.def_kernel(tune=...)"
    if not isinstance(tune, Mapping):
        raise KernelTypeError(
            f"{where}: expected a dict {{parameter: [candidate values]}}, e.g. "
            f"{{'BLOCK': [256, 1024]}} (got {type(tune).__name__}: {tune!r})."
        )
    spec = []
    for name, values in tune.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise KernelRegistrationError(
                f"{where}: parameter names are identifiers (got {name!r})."
            )
        if name in RESERVED_KEYWORDS:
            raise KernelRegistrationError(
                f"{where}: '{name}' is reserved (reserved: "
                f"{sorted(RESERVED_KEYWORDS)}); rename the parameter."
            )
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise KernelTypeError(
                f"{where}: the candidates of '{name}' must be a list or tuple of "
                f"values, e.g. [256, 1024] (got {type(values).__name__}: {values!r})."
            )
        if not values:
            raise KernelRegistrationError(
                f"{where}: '{name}' has no candidate value; give at least one (the "
                f"first is the default)."
            )
        for value in values:
            try:
                hash(value)
            except TypeError:
                raise KernelTypeError(
                    f"{where}: candidate {value!r} of '{name}' is not hashable; "
                    f"candidates become static parameters (use tuples, not lists)."
                ) from None
        if len(set(map(repr, values))) != len(values):
            raise KernelRegistrationError(
                f"{where}: '{name}' lists a candidate twice ({list(values)!r})."
            )
        spec.append((name, tuple(values)))
    return tuple(spec)


class RegistrationMixin:
    """``def_kernel`` and the shorthands (mixed into ``XLACustomKernel``)."""

    name: str
    _table: KernelTable

    def def_kernel(
        self,
        backend: str,
        platform: PlatformName,
        kg: KernelGenerator,
        asdefault: bool = False,
        *,
        tune: Tune = None,
    ) -> None:
        """Register kernel generator ``kg`` for ``backend`` on ``platform``.

        The first backend registered for a platform becomes its default;
        ``asdefault=True`` makes this one the default instead.

        ``tune`` (our addition) names the generator's launch parameters and their
        candidate values, e.g. ``{"BLOCK": [256, 1024, 4096], "num_warps": [4, 8]}``:
        the generator is then called with one value of each — the one measured
        fastest for the call's device and shape (``tune()``, ``docs/tuning.md``),
        else the first — unless the call passes that keyword itself.

        Raises:
            KernelTypeError: (a ``TypeError`` and an ``AssertionError``) ``backend``
                or ``platform`` is not a string, or ``kg`` is not callable.
            KernelRegistrationError: (a ``ValueError``) empty backend, unknown
                platform, or a ``tune`` that is not ``{name: [values, ...]}``.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.def_kernel")
            >>> op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: x + 1)
            >>> op.available_backends("cpu")
            ['jax_raw']
        """
        if not isinstance(backend, str):
            raise KernelTypeError(
                f"XLACustomKernel '{self.name}'.def_kernel(): backend must be a "
                f"string such as 'numba' (got {type(backend).__name__}: {backend!r})."
            )
        if not backend:
            raise KernelRegistrationError(
                f"XLACustomKernel '{self.name}'.def_kernel(): backend must be a "
                f"non-empty string such as 'numba' (got '')."
            )
        check_platform(self.name, "def_kernel", platform, list(PLATFORMS))
        if not callable(kg):
            raise KernelTypeError(
                f"XLACustomKernel '{self.name}'.def_kernel(): the kernel generator "
                f"must be callable (got {type(kg).__name__}). Pass a function that "
                f"takes outs=... and keywords and returns the kernel function."
            )
        spec = check_tune(self.name, tune)
        old_default = self._table.default(platform)
        self._table.add(KernelEntry(backend, platform, kg, spec), asdefault=asdefault)
        if old_default is not None and self._table.default(platform) != old_default:
            jc.bump_dispatch_epoch()

    def def_numba_kernel(
        self, kg: KernelGenerator, asdefault: bool = False, *, tune: Tune = None
    ) -> None:
        """Register a Numba kernel generator for the CPU (backend ``'numba'``)."""
        self.def_kernel("numba", "cpu", kg, asdefault, tune=tune)

    def def_numba_cuda_kernel(
        self, kg: KernelGenerator, asdefault: bool = False, *, tune: Tune = None
    ) -> None:
        """Register a Numba-CUDA kernel generator for the GPU."""
        self.def_kernel("numba_cuda", "gpu", kg, asdefault, tune=tune)

    def def_warp_kernel(
        self, kg: KernelGenerator, asdefault: bool = False, *, tune: Tune = None
    ) -> None:
        """Register an NVIDIA Warp kernel generator for the GPU."""
        self.def_kernel("warp", "gpu", kg, asdefault, tune=tune)

    def def_triton_kernel(
        self, kg: KernelGenerator, asdefault: bool = False, *, tune: Tune = None
    ) -> None:
        """Register a Triton kernel generator for the GPU.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.def_triton_kernel")
            >>> op.def_triton_kernel(lambda outs, BLOCK, **kw: None,
            ...                      tune={"BLOCK": [256, 1024, 4096]})
            >>> op.tunables("gpu")
            {'triton': (('BLOCK', (256, 1024, 4096)),)}
        """
        self.def_kernel("triton", "gpu", kg, asdefault, tune=tune)

    def def_pallas_kernel(
        self,
        platform: PlatformName,
        kg: KernelGenerator,
        asdefault: bool = False,
        *,
        tune: Tune = None,
    ) -> None:
        """Register a Pallas kernel generator for ``'gpu'``, ``'tpu'`` or ``'cpu'``.

        On ``'cpu'`` the kernel runs in Pallas interpret mode (a debugging path that
        makes Pallas kernels testable everywhere); the generator typically returns
        :func:`polykernel.pallas_kernel`, which builds the ``pallas_call`` for the
        platform being lowered.

        Raises:
            UnsupportedPlatformError: (a ``ValueError`` and an ``AssertionError``)
                ``platform`` is not ``'gpu'``, ``'tpu'`` or ``'cpu'``.

        Example:
            >>> import polykernel as pk
            >>> def add_one(x_ref, o_ref):
            ...     o_ref[...] = x_ref[...] + 1
            >>> op = pk.XLACustomKernel("doc.def_pallas_kernel")
            >>> op.def_pallas_kernel(
            ...     "cpu", lambda outs, **kw: pk.pallas_kernel(add_one, outs[0])
            ... )
            >>> op.available_backends("cpu")
            ['pallas']
        """
        check_platform(
            self.name,
            "def_pallas_kernel",
            platform,
            ["gpu", "tpu", "cpu"],
            UnsupportedPlatformError,
        )
        self.def_kernel("pallas", platform, kg, asdefault, tune=tune)

    def def_cuda_raw_kernel(
        self,
        kg: KernelGenerator,
        platform: Literal["cpu", "gpu"] = "gpu",
        asdefault: bool = False,
        *,
        tune: Tune = None,
    ) -> None:
        """Register a raw C++ (``'cpu'``) or CUDA (``'gpu'``) kernel generator.

        The generator typically calls ``polykernel.load_cpp_inline`` /
        ``load_cuda_inline`` and returns a function that calls the loaded module.
        """
        check_platform(self.name, "def_cuda_raw_kernel", platform, ["cpu", "gpu"])
        self.def_kernel("cuda_raw", platform, kg, asdefault, tune=tune)

    def def_jax_raw_kernel(
        self,
        kg: KernelGenerator,
        platform: PlatformName | None = None,
        asdefault: bool = False,
    ) -> None:
        """Register a pure-JAX reference kernel for one platform, or all if ``None``."""
        for p in (platform,) if platform is not None else PLATFORMS:
            self.def_kernel("jax_raw", p, kg, asdefault)
