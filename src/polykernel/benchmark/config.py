"""``BenchmarkConfig``: one benchmark case (inputs plus keyword arguments)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import BenchmarkTypeError

__all__ = ["BenchmarkConfig"]


@dataclass
class BenchmarkConfig:
    """One case a primitive's benchmark data function produces.

    The first four fields are the reference's ``(name, args, kernel_kwargs,
    data_kwargs)``; ``work`` is our addition.

    Attributes:
        name: Label of the case in tables and files (e.g. ``"n=10000,p=0.05"``).
        args: Positional inputs passed to the primitive's call function.
        kernel_kwargs: Keyword arguments passed to the call function.
        data_kwargs: Parameters that describe how the data was made; only recorded.
        work: Optional ``(amount, unit)`` of work one call does, e.g.
            ``(4e6, "B")`` bytes moved or ``(2e9, "FLOP")``; records then report a
            throughput in ``unit/s``.

    Example:
        >>> import numpy as np
        >>> from polykernel import BenchmarkConfig
        >>> cfg = BenchmarkConfig("n=4", (np.ones(4, np.float32),), work=(16, "B"))
        >>> cfg.label
        'n=4'
    """

    name: str
    args: tuple = ()
    kernel_kwargs: dict[str, Any] = field(default_factory=dict)
    data_kwargs: dict[str, Any] = field(default_factory=dict)
    work: tuple[float, str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise BenchmarkTypeError(
                f"BenchmarkConfig: name must be a non-empty string, got {self.name!r}."
            )
        if not isinstance(self.args, tuple):
            self.args = tuple(self.args)
        for attr in ("kernel_kwargs", "data_kwargs"):
            if not isinstance(getattr(self, attr), dict):
                raise BenchmarkTypeError(
                    f"BenchmarkConfig {self.name!r}: {attr} must be a dict, got "
                    f"{type(getattr(self, attr)).__name__}."
                )
        if self.work is not None:
            ok = (
                isinstance(self.work, tuple)
                and len(self.work) == 2
                and isinstance(self.work[0], int | float)
                and self.work[0] > 0
                and isinstance(self.work[1], str)
            )
            if not ok:
                raise BenchmarkTypeError(
                    f"BenchmarkConfig {self.name!r}: work must be (amount > 0, unit), "
                    f"e.g. (4e6, 'B') or (2e9, 'FLOP'); got {self.work!r}."
                )

    @property
    def label(self) -> str:
        """The case's label (its ``name``)."""
        return self.name

    def put_args(self, device: Any = None) -> BenchmarkConfig:
        """Return a copy whose array ``args`` live on ``device`` (default device).

        Arrays are moved with ``jax.device_put`` and waited for, so a benchmark
        never times the transfer. Non-array leaves (Python scalars, ``None``) are
        left untouched, since the call function may treat them as static.

        Example:
            >>> import numpy as np
            >>> from polykernel import BenchmarkConfig
            >>> BenchmarkConfig("x", (np.zeros(2),)).put_args().args[0].shape
            (2,)
        """
        import jax
        import numpy as np

        def put(leaf: Any) -> Any:
            if isinstance(leaf, jax.Array | np.ndarray | np.generic):
                return jax.device_put(leaf, device)
            return leaf

        args = jax.block_until_ready(jax.tree_util.tree_map(put, self.args))
        return replace(self, args=tuple(args))
