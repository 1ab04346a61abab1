"""How kernels join a primitive: ``def_kernel``, its per-backend shorthands, ``tune``.

Mixed into :class:`~polykernel.core.primitive.XLACustomKernel`: each shorthand
(``def_numba_kernel``, ``def_pallas_kernel``, ...) is ``def_kernel`` with the
backend (and platform) filled in, as the reference API has them. ``tune`` (our
addition) declares a generator's launch parameters and their candidate values:
:func:`check_tune` normalises it to ``((name, (value, ...)), ...)`` in declared
order, the first value of each being the default.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import _jax_compat as jc
from ..contract.keywords import RESERVED_KEYWORDS
from ..dispatch import values
from ..errors import KernelRegistrationError, KernelTypeError, UnsupportedPlatformError
from ..platforms import PLATFORMS
from ..types import KernelGenerator, PlatformName
from .kernel_table import KernelEntry, KernelTable

__all__ = [
    "RegistrationMixin",
    "check_platform",
    "check_platform_type",
    "check_tune",
    "check_tune_names",
]

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
        KernelTypeError: not a mapping of names to lists or tuples of values a
            table can hold exactly (bools, ints, finite floats, strings, tuples of
            these: :mod:`polykernel.dispatch.values`).
        KernelRegistrationError: a name that is not an identifier or is reserved,
            a parameter without candidates, or a candidate listed twice.
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
    for name, candidates in tune.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise KernelRegistrationError(
                f"{where}: parameter names are identifiers (got {name!r})."
            )
        if name in RESERVED_KEYWORDS:
            raise KernelRegistrationError(
                f"{where}: '{name}' is reserved (reserved: "
                f"{sorted(RESERVED_KEYWORDS)}); rename the parameter."
            )
        if not isinstance(candidates, list | tuple):
            raise KernelTypeError(
                f"{where}: the candidates of '{name}' must be a list or tuple of "
                f"values, e.g. [256, 1024] (got {type(candidates).__name__}: "
                f"{candidates!r:.80})."
            )
        if not candidates:
            raise KernelRegistrationError(
                f"{where}: '{name}' has no candidate value; give at least one (the "
                f"first is the default)."
            )
        for value in candidates:
            problem = values.value_problem(value)
            if problem is not None:
                raise KernelTypeError(
                    f"{where}: candidate {value!r:.60} of '{name}' is {problem}; a "
                    f"candidate is a bool, int, finite float, str or a tuple of "
                    f"these, so a tuned table returns exactly the value declared."
                )
        tokens = [values.token(v) for v in candidates]
        if len(set(tokens)) != len(tokens):
            raise KernelRegistrationError(
                f"{where}: '{name}' lists a candidate twice ({list(candidates)!r})."
            )
        spec.append((name, tuple(candidates)))
    return tuple(spec)


def check_tune_names(
    owner: str, backend: str, generator: Any, spec: Sequence[tuple[str, Sequence[Any]]]
) -> None:
    """Check that the generator declares every launch parameter of ``spec`` by name
    (a ``**kwargs`` would swallow a misspelt one, and the tuner would time the same
    program under several names) and gives none a default other than its first
    candidate (the default is written once: the first candidate).

    Raises:
        KernelRegistrationError: a name the generator does not declare, or a
            signature default that differs from the first candidate.
    """
    if not spec:
        return
    where = f"XLACustomKernel '{owner}'.def_kernel('{backend}', tune=...)"
    try:
        parameters = inspect.signature(generator).parameters
    except (TypeError, ValueError):
        raise KernelRegistrationError(
            f"{where}: the generator's signature cannot be read, so its launch "
            f"parameters {[n for n, _ in spec]} cannot be checked; pass a Python "
            f"function (or functools.partial) that names them."
        ) from None
    named = {
        n: p for n, p in parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }  # fmt: skip
    for name, candidates in spec:
        if name not in named:
            close = difflib.get_close_matches(name, list(named), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise KernelRegistrationError(
                f"{where}: the generator has no parameter '{name}'{hint}; its "
                f"parameters are {list(named)}. Add '{name}' to its signature (a "
                f"**kwargs does not count: it would take a misspelt name silently), "
                f"or fix the name in tune=."
            )
        default = named[name].default
        if default is not inspect.Parameter.empty and not _same(default, candidates[0]):
            raise KernelRegistrationError(
                f"{where}: the generator's default {name}={default!r} differs from "
                f"the first candidate {candidates[0]!r}, which is the default of a "
                f"launch parameter. Drop the default from the signature (the "
                f"lowering always passes a value), or list it first in tune=."
            )


def _same(value: Any, candidate: Any) -> bool:
    return values.value_problem(value) is None and values.token(value) == values.token(
        candidate
    )


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
        check_tune_names(self.name, backend, kg, spec)
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
        *,
        tune: Tune = None,
    ) -> None:
        """Register a pure-JAX reference kernel for one platform, or all if ``None``.

        Example:
            >>> import polykernel as pk
            >>> op = pk.XLACustomKernel("doc.def_jax_raw_kernel")
            >>> op.def_jax_raw_kernel(lambda outs, unroll, **kw: lambda x: 2 * x,
            ...                       platform="cpu", tune={"unroll": [1, 4]})
            >>> op.tunables("cpu")
            {'jax_raw': (('unroll', (1, 4)),)}
        """
        for p in (platform,) if platform is not None else PLATFORMS:
            self.def_kernel("jax_raw", p, kg, asdefault, tune=tune)
