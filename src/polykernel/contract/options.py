"""``vmap_method`` and ``input_output_aliases``: one set of rules and defaults.

Every kernel wrapper takes the same two options and resolves them here:

- ``vmap_method`` is one of :data:`VMAP_METHODS`; ``None`` means the default of every
  wrapper: ``"expand_dims"`` (one call sees the whole batch), or ``"broadcast_all"``
  when outputs alias inputs (an aliased input must carry the batch too). For the same
  reason ``"expand_dims"`` with aliases batches as ``"broadcast_all"``: XLA refuses
  an aliased input that keeps a size-one batch axis while its output has the batch.
- ``input_output_aliases`` is ``{input index: output index}`` of ints; an output index
  must exist (checked when the wrapper is made), an input index too (checked when it
  is called, once the inputs are known).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import KernelRegistrationError, KernelTypeError
from ..types import VmapMethod

__all__ = [
    "VMAP_METHODS",
    "VmapMethod",
    "check_alias_inputs",
    "check_aliases",
    "resolve_vmap_method",
]


#: Accepted ``vmap_method`` values (``None``: the default, see the module docstring).
VMAP_METHODS: tuple[VmapMethod | None, ...] = (
    None,
    "sequential",
    "sequential_unrolled",
    "expand_dims",
    "broadcast_all",
)


def resolve_vmap_method(
    where: str, vmap_method: object, aliases: Mapping[int, int]
) -> VmapMethod:
    """``vmap_method`` checked, with ``None`` replaced by the default.

    Raises:
        KernelRegistrationError: an unknown method (a ``ValueError``).
    """
    if not isinstance(vmap_method, str | None) or vmap_method not in VMAP_METHODS:
        raise KernelRegistrationError(
            f"{where}: vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}."
        )
    if vmap_method is None or vmap_method == "expand_dims":
        return "broadcast_all" if aliases else "expand_dims"
    return vmap_method


def check_aliases(where: str, aliases: object, n_outputs: int) -> dict[int, int]:
    """``input_output_aliases`` as a dict (``{}`` for None), output indices checked.

    Raises:
        KernelTypeError: not a dict of ints (or None).
        KernelRegistrationError: an output index that does not exist, or two inputs
            aliasing one output.
    """
    if aliases is None:
        return {}
    if not isinstance(aliases, Mapping) or not all(
        _is_int(k) and _is_int(v) for k, v in aliases.items()
    ):
        raise KernelTypeError(
            f"{where}: input_output_aliases must be a dict {{input index: output "
            f"index}} of ints, or None (got {type(aliases).__name__}: {aliases!r})."
        )
    checked = {int(i): int(o) for i, o in aliases.items()}
    for i, o in checked.items():
        if i < 0 or not 0 <= o < n_outputs:
            raise KernelRegistrationError(
                f"{where}: input_output_aliases maps input {i} to output {o}, but "
                f"there are {n_outputs} outputs (and input indices start at 0)."
            )
    if len(set(checked.values())) != len(checked):
        raise KernelRegistrationError(
            f"{where}: input_output_aliases maps several inputs to one output "
            f"({checked}); each output can alias one input."
        )
    return checked


def check_alias_inputs(where: str, aliases: Mapping[int, int], n_inputs: int) -> None:
    """Refuse an alias naming an input the call does not have.

    Raises:
        KernelRegistrationError: the alias's input index is out of range.
    """
    for i in aliases:
        if not 0 <= i < n_inputs:
            raise KernelRegistrationError(
                f"{where}: input_output_aliases names input {i}, but the call has "
                f"{n_inputs} input{'' if n_inputs == 1 else 's'} (indices 0 to "
                f"{n_inputs - 1}); fix the alias or pass the missing input."
            )


def _is_int(value: object) -> bool:
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
