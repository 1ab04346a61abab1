"""The kernel call under test: inputs, ``outs``, parameters, one platform.

Every check asks a :class:`Subject` for the same things: call one backend eagerly or
under ``jit``, the flat list of outputs, which inputs and outputs are floating, and
the tolerance of each output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from ..benchmark.tolerance import Tolerance, is_float, tolerance_for
from .report import FAIL, PASS, SKIP, CheckResult

__all__ = ["Subject"]


@dataclasses.dataclass
class Subject:
    """One ``check_kernel`` call on one platform.

    Attributes:
        kernel: The ``XLACustomKernel``.
        args: Inputs, as device arrays of the platform.
        outs: The ``outs`` pytree the kernel is called with.
        kwargs: Static parameters.
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
        device: The JAX device the calls run on.
        rtol, atol: User overrides of the float tolerances (``None``: per dtype).
        linear_argnums: Inputs the kernel is linear in, or ``None`` to detect them.
    """

    kernel: Any
    args: tuple[Any, ...]
    outs: Any
    kwargs: dict[str, Any]
    platform: str
    device: Any
    rtol: float | None = None
    atol: float | None = None
    linear_argnums: Sequence[int] | None = None
    seed: int = 0

    def function(self, backend: str) -> Callable[..., list[Any]]:
        """``f(*args) -> [outputs]`` calling ``backend`` (traceable)."""

        def call(*args: Any) -> list[Any]:
            result = self.kernel(*args, outs=self.outs, backend=backend, **self.kwargs)
            return jax.tree.leaves(result)

        return call

    def eager(self, backend: str, *args: Any) -> list[np.ndarray]:
        """Run ``backend`` outside ``jit`` (on ``args``, default the inputs)."""
        with jax.default_device(self.device):
            out = self.function(backend)(*(args or self.args))
        return [np.asarray(o) for o in out]

    def jitted(self, backend: str) -> Callable[..., list[Any]]:
        return jax.jit(self.function(backend))

    @property
    def out_structs(self) -> list[Any]:
        return jax.tree.leaves(self.outs, is_leaf=lambda x: hasattr(x, "dtype"))

    def tolerances(self) -> list[Tolerance]:
        return [tolerance_for(o.dtype, self.rtol, self.atol) for o in self.out_structs]

    def tolerance_label(self) -> str:
        """The output tolerances, e.g. ``"rtol=1e-05 atol=1e-05"`` or two of them."""
        labels = dict.fromkeys(str(t) for t in self.tolerances())
        return "; ".join(labels)

    def float_inputs(self) -> list[int]:
        return [i for i, a in enumerate(self.args) if is_float(a.dtype)]

    def float_outputs(self) -> list[int]:
        return [k for k, o in enumerate(self.out_structs) if is_float(o.dtype)]

    def rng(self, salt: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, salt])

    def random_like(self, x: Any, salt: int) -> Any:
        """Standard-normal values shaped and typed like ``x``, on the device."""
        values = self.rng(salt).standard_normal(np.shape(x))
        if np.iscomplexobj(np.zeros((), x.dtype)):
            values = values + 1j * self.rng(salt + 1).standard_normal(np.shape(x))
        return jax.device_put(np.asarray(values).astype(x.dtype), self.device)

    # -- result rows -------------------------------------------------------------
    def passed(
        self, check: str, backend: str, case: str = "", comparison=None, detail=""
    ):
        return self._row(check, backend, PASS, case, comparison, detail)

    def failed(
        self, check: str, backend: str, case: str = "", comparison=None, detail=""
    ):
        return self._row(check, backend, FAIL, case, comparison, detail)

    def skipped(
        self, check: str, backend: str, reason: str, case: str = ""
    ) -> CheckResult:
        return CheckResult(check, backend, self.platform, SKIP, case, detail=reason)

    def judged(
        self, check: str, backend: str, comparison, case="", tolerance=""
    ) -> CheckResult:
        """A pass or fail row from a ``Comparison``; the detail says the tolerance."""
        if comparison.ok:
            return self.passed(check, backend, case, comparison, str(tolerance))
        text = f"{comparison.detail} ({tolerance})" if tolerance else comparison.detail
        return self.failed(check, backend, case, comparison, text)

    def _row(self, check, backend, status, case, comparison, detail) -> CheckResult:
        return CheckResult(
            check,
            backend,
            self.platform,
            status,
            case,
            None if comparison is None else comparison.max_abs,
            None if comparison is None else comparison.max_rel,
            detail,
        )


def error_text(err: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, shortened."""
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
