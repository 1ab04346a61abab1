"""Validation of ``check_kernel``'s arguments, before anything runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import CheckTypeError, CheckValueError, KernelRegistrationError

if TYPE_CHECKING:
    from ..core.primitive import XLACustomKernel

__all__ = ["check_options", "linear_argnums_of", "resolve_kernel", "wanted_checks"]


def resolve_kernel(kernel: object) -> XLACustomKernel:
    from ..core.primitive import XLACustomKernel

    if isinstance(kernel, str):
        from ..core.registry import get_primitive

        kernel = get_primitive(kernel)
    if not isinstance(kernel, XLACustomKernel):
        raise CheckTypeError(
            f"check_kernel(): kernel must be an XLACustomKernel or the name of a "
            f"registered one (got {type(kernel).__name__})."
        )
    return kernel


def wanted_checks(checks: Sequence[str] | None, known: Sequence[str]) -> frozenset[str]:
    if checks is None:
        return frozenset(known)
    if isinstance(checks, str):
        checks = [checks]
    unknown = sorted(set(checks) - set(known))
    if unknown:
        raise CheckValueError(
            f"check_kernel(): unknown check(s) {unknown}; choose from {list(known)}."
        )
    return frozenset(checks)


def check_options(kernel, reference, backends, atol, rtol, kwargs) -> None:
    name = kernel.name
    if "backend" in kwargs:
        raise CheckValueError(
            f"check_kernel('{name}'): pass backends=[...] to choose backends; "
            f"'backend' is not a kernel parameter here."
        )
    registered = {
        b for p in ("cpu", "gpu", "tpu") for b in kernel.available_backends(p)
    }
    if isinstance(backends, str):
        raise CheckTypeError(
            f"check_kernel('{name}'): backends must be a list of names, e.g. "
            f"backends=[{backends!r}] (got the string {backends!r})."
        )
    for b in [*(backends or ()), *([reference] if isinstance(reference, str) else [])]:
        if b not in registered:
            raise KernelRegistrationError(
                f"check_kernel('{name}'): backend {b!r} is not registered "
                f"(registered: {sorted(registered)})."
            )
    if reference is not None and not (
        isinstance(reference, str) or callable(reference)
    ):
        raise CheckTypeError(
            f"check_kernel('{name}'): reference must be a backend name, a callable "
            f"or None (got {type(reference).__name__})."
        )
    for label, value in (("atol", atol), ("rtol", rtol)):
        if value is not None and not (isinstance(value, (int, float)) and value >= 0):
            raise CheckValueError(
                f"check_kernel('{name}'): {label} must be a number >= 0 or None "
                f"(got {value!r})."
            )


def linear_argnums_of(kernel, linear_argnums, arrays) -> list[int] | None:
    if linear_argnums is None:
        return None
    items = list(linear_argnums)
    for i in items:
        if not isinstance(i, int) or not 0 <= i < len(arrays):
            raise CheckValueError(
                f"check_kernel('{kernel.name}'): linear_argnums entry {i!r} is not an "
                f"input index (the call has {len(arrays)} "
                f"input{'s' if len(arrays) != 1 else ''})."
            )
    return items
