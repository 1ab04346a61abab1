"""The content-derived name of a Warp CPU target (``pk_warp_<24 hex>``).

One digest over everything that decides what the handler does: Warp's module hash
and the kernel's mangled name (Warp's own identity of the code it builds), Warp's
version (its code generation, which the module hash does not cover), the call
signature the handler checks, the launch grid, the handler template and the FFI
API version it reports. The same in every process, so a program compiled or
exported in one finds its target in the next; a stored entry whose parts do not
hash to the name it is filed under is never used.
"""

from __future__ import annotations

from typing import Any

from ...ffi import abi
from ...ffi.handler_ir.signature import Signature
from ...ffi.naming import target_name

__all__ = ["target_for"]

# Bump when the generated handler changes meaning. 2: Warp's entry called by
# symbol, in one shared object with Warp's object; Warp's version in the name.
_TEMPLATE_VERSION = "2"


def target_for(digest: str, name: str, sig: Signature, launch: Any, warp: str) -> str:
    """The target name of the handler of Warp's kernel ``name`` (mangled) in the
    module of hash ``digest`` built by Warp ``warp``, for ``sig`` and ``launch``."""
    return target_name(
        "pk_warp",
        digest,
        name,
        sig.key(),
        repr(launch),
        warp,
        _TEMPLATE_VERSION,
        f"{abi.API_MAJOR}.{abi.API_MINOR}",
    )
