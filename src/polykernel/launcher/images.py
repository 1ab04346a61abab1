"""A compiled kernel's image: a cubin or PTX for one architecture (pure data).

Apart from :mod:`.kernels` (registration) so that the cache (:mod:`.cache`), which
registration itself uses, can read images back without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import KernelRegistrationError
from ..settings.cuda_arch import normalize_arch

__all__ = ["KernelImage"]

#: Image kinds, as the native launcher numbers them.
_KINDS = {"cubin": 0, "ptx": 1}


@dataclass(frozen=True)
class KernelImage:
    """One compiled image of a kernel: ``kind`` ``"cubin"`` or ``"ptx"`` for ``arch``.

    Example:
        >>> from polykernel.launcher.images import KernelImage
        >>> KernelImage("ptx", "sm_90", b".version 8.0").arch
        '90'
    """

    kind: str
    arch: str
    data: bytes

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise KernelRegistrationError(
                "polykernel.launcher: image kind must be 'cubin' or 'ptx', got "
                f"{self.kind!r}."
            )
        object.__setattr__(self, "arch", normalize_arch(self.arch))
        if not isinstance(self.data, bytes) or not self.data:
            raise KernelRegistrationError(
                "polykernel.launcher: an image's data must be non-empty bytes."
            )

    @property
    def arch_number(self) -> int:
        return int("".join(c for c in self.arch if c.isdigit()))
