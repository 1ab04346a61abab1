"""Grid and block of a Numba-CUDA launch, from ``(grid, block)`` or ``launch_dims``.

Pure arithmetic shared by the GPU path (the launcher's spec) and the simulator, so
the CPU tests check exactly what a GPU would launch. The rule: give ``grid`` and
``block`` together, or ``launch_dims`` alone (the total number of threads per
dimension; each dimension gets ``ceil(launch_dims / block)`` blocks, with
``threads_per_block`` threads along the first dimension and 1 along the others).

Example:
    >>> from polykernel.backends.numba_cuda.launch_config import resolve_launch
    >>> resolve_launch(launch_dims=1000, threads_per_block=256)
    ((4, 1, 1), (256, 1, 1))
    >>> resolve_launch(grid=(2, 3), block=(16, 16))
    ((2, 3, 1), (16, 16, 1))
"""

from __future__ import annotations

from ...contract.launch import launch_count, launch_shape, three_axes
from ...errors import KernelRegistrationError

__all__ = ["RULE", "resolve_launch"]

RULE = (
    "give grid and block together (e.g. grid=4, block=256), or launch_dims alone "
    "(e.g. launch_dims=1024)"
)
Dims = tuple[int, int, int]
#: CUDA's limit on the threads of one block.
MAX_BLOCK = 1024


def _dims(where: str, name: str, value: object, minimum: int = 0) -> Dims:
    maximum = MAX_BLOCK if name == "block" else 2**31 - 1
    dims = launch_shape(where, name, value, max_rank=3, minimum=minimum,
                        maximum=maximum)  # fmt: skip
    return three_axes(dims)


def resolve_launch(
    grid: object = None,
    block: object = None,
    launch_dims: object = None,
    threads_per_block: int = 256,
    where: str = "numba_cuda_kernel",
) -> tuple[Dims, Dims]:
    """Return ``(grid, block)`` as 3-tuples.

    Raises:
        KernelRegistrationError (a ValueError): neither or both forms are given, a
            form is incomplete, or a dimension is not a non-negative int (a block
            dimension must be in [1, 1024]); the rules of
            :mod:`polykernel.contract.launch`.
    """
    explicit = grid is not None or block is not None
    if launch_dims is not None and explicit:
        raise KernelRegistrationError(
            f"{where}: launch_dims cannot be combined with grid/block; {RULE}."
        )
    if launch_dims is None:
        if grid is None or block is None:
            missing = "block" if block is None else "grid"
            got = "none given" if not explicit else f"{missing} is missing"
            raise KernelRegistrationError(
                f"{where}: no launch configuration ({got}); {RULE}."
            )
        return _dims(where, "grid", grid), _dims(where, "block", block, 1)
    tpb = launch_count(where, "threads_per_block", threads_per_block, minimum=1,
                       maximum=MAX_BLOCK)  # fmt: skip
    total = _dims(where, "launch_dims", launch_dims)
    block3 = (tpb, 1, 1)  # y and z get one thread per block
    gx, gy, gz = (-(-t // b) for t, b in zip(total, block3, strict=True))
    return (gx, gy, gz), block3
