"""``outs`` of the Numba-CUDA wrappers: one ShapeDtypeStruct or a pytree of them."""

from __future__ import annotations

from typing import Any

from ...errors import KernelRegistrationError

__all__ = ["flatten_outs", "unflatten"]


def _is_spec(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def flatten_outs(where: str, outs: Any) -> tuple[list[Any], Any]:
    """The leaves of ``outs`` (each with ``.shape``/``.dtype``) and its structure.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> leaves, tree = flatten_outs("f", jax.ShapeDtypeStruct((2,), jnp.int32))
        >>> len(leaves)
        1
    """
    import jax

    leaves, treedef = jax.tree.flatten(outs, is_leaf=_is_spec)
    if not leaves or not all(_is_spec(x) for x in leaves):
        raise KernelRegistrationError(
            f"{where}: outs must be a jax.ShapeDtypeStruct or a non-empty sequence "
            f"(or pytree) of them, got {outs!r}."
        )
    return [jax.ShapeDtypeStruct(tuple(x.shape), x.dtype) for x in leaves], treedef


def unflatten(treedef: Any, results: list[Any]) -> Any:
    """Rebuild the structure of ``outs`` from the output arrays."""
    import jax

    return jax.tree.unflatten(treedef, list(results))
