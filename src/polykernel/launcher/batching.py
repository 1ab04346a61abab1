"""What one call launches when buffers carry ``jax.vmap`` axes (pure, no JAX).

With ``vmap_method="expand_dims"`` or ``"broadcast_all"`` a GPU kernel receives its
buffers with ``K`` extra leading axes. The rule, shared by the native launcher
(``plan_batch`` in ``launcher/csrc/gpu_launcher/plan.h``) and the CPU emulators here:

* output 0 fixes the batch shape: its rank minus its compiled rank is ``K``, and its
  leading ``K`` dims are the batch shape;
* every output has exactly that batch shape;
* an input has either no extra axis (shared by every element) or ``K`` of them, each
  equal to the batch dim or 1 (broadcast);
* the trailing dims of every buffer equal its compiled shape.

The kernel then runs once per batch element (row-major order), on that element's
slice of every buffer. A problem is reported as a :class:`ValueError` whose message
matches the launcher's.

Example:
    >>> from polykernel.launcher.batching import plan_batch
    >>> plan = plan_batch([(3,), (3,)], n_in=1, shapes=[(1, 3), (4, 3)])
    >>> plan.batch_shape, plan.launches
    ((4,), 4)
    >>> plan.index(2, 0), plan.index(2, 1)
    ((0,), (2,))
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["BatchPlan", "plan_batch"]

MAX_BATCH_RANK = 8


@dataclass(frozen=True)
class BatchPlan:
    """The batch shape and, per buffer, how many leading axes it carries."""

    batch_shape: tuple[int, ...]
    extra: tuple[int, ...]  # leading vmap axes of each buffer (0 or len(batch_shape))
    shapes: tuple[tuple[int, ...], ...]  # actual shapes

    @property
    def launches(self) -> int:
        return math.prod(self.batch_shape)

    def elements(self) -> Iterator[tuple[int, ...]]:
        """Every batch index, row-major (the launch order)."""
        if not self.batch_shape:
            yield ()
            return
        for flat in range(self.launches):
            index = []
            for n in reversed(self.batch_shape):
                index.append(flat % n)
                flat //= n
            yield tuple(reversed(index))

    def index(self, element: int | tuple[int, ...], buffer: int) -> tuple[int, ...]:
        """The leading index of ``buffer`` for a batch element (0 where broadcast)."""
        if isinstance(element, int):
            element = list(self.elements())[element]
        if self.extra[buffer] == 0:
            return ()
        dims = self.shapes[buffer][: self.extra[buffer]]
        return tuple(i if n != 1 else 0 for i, n in zip(element, dims, strict=True))


def _fmt(shape: Sequence[int]) -> str:
    return ", ".join(str(d) for d in shape)


def plan_batch(
    compiled: Sequence[tuple[int, ...]],
    n_in: int,
    shapes: Sequence[tuple[int, ...]],
    name: str = "kernel",
) -> BatchPlan:
    """Check ``shapes`` (actual, inputs then outputs) against the ``compiled`` ones.

    Raises:
        ValueError: a buffer fits neither the compiled shape nor the batch rule.
    """
    out0 = len(shapes[n_in]) - len(compiled[n_in])
    if not 0 <= out0 <= MAX_BATCH_RANK:
        raise ValueError(
            f"{name}: output 0 has rank {len(shapes[n_in])}, expected "
            f"{len(compiled[n_in])} (plus at most {MAX_BATCH_RANK} vmap axes)"
        )
    batch = tuple(shapes[n_in][:out0])
    extras = []
    for i, (want, got) in enumerate(zip(compiled, shapes, strict=True)):
        extra = len(got) - len(want)
        ok = extra == out0 or (extra == 0 and i < n_in)
        ok = ok and tuple(got[extra:]) == tuple(want)
        for a in range(extra if ok else 0):
            ok = ok and (got[a] == batch[a] or (got[a] == 1 and i < n_in))
        if not ok:
            role, index = ("input", i) if i < n_in else ("output", i - n_in)
            raise ValueError(
                f"{name}: {role} {index} has shape ({_fmt(got)}); the kernel was "
                f"compiled for ({_fmt(want)}) with {out0} leading vmap axes"
            )
        extras.append(extra)
    return BatchPlan(batch, tuple(extras), tuple(tuple(s) for s in shapes))
