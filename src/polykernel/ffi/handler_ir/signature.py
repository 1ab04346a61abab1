"""What a generated XLA FFI handler checks and how its kernel sees the buffers."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HALF_DTYPES", "HALF_MODES", "Signature"]

HALF_DTYPES = ("float16", "bfloat16")
# "float32": the kernel sees float32 arrays, rounded back (to nearest even) into
# half-precision outputs; "bits": it sees the raw bits as uint16 arrays.
HALF_MODES = ("float32", "bits")


@dataclass(frozen=True)
class Signature:
    """``(dtype name, rank)`` per input and output, ``(name, dtype)`` per attribute.

    Attributes are sorted by name, as XLA passes them. ``half`` picks how float16
    and bfloat16 buffers reach the kernel; ``aliases`` (input, output) pairs share
    one float32 buffer when both are converted, so aliasing stays visible.
    """

    ins: tuple[tuple[str, int], ...]
    outs: tuple[tuple[str, int], ...]
    attrs: tuple[tuple[str, str], ...]
    half: str = "float32"
    aliases: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.half not in HALF_MODES:
            raise ValueError(f"half must be one of {HALF_MODES}, got {self.half!r}")

    def spec(self) -> str:
        """Compact text form, used in names and error messages."""
        ins = ",".join(f"{d}[{r}]" for d, r in self.ins)
        outs = ",".join(f"{d}[{r}]" for d, r in self.outs)
        attrs = ",".join(f"{n}:{d}" for n, d in self.attrs)
        return f"{ins};{outs};{attrs}"

    def key(self) -> str:
        """Everything that changes the generated code (``spec`` plus options)."""
        aliases = ",".join(f"{i}>{o}" for i, o in self.aliases)
        return f"{self.spec()};half={self.half};aliases={aliases}"

    @property
    def buffers(self) -> tuple[tuple[str, int], ...]:
        """Inputs, then outputs."""
        return self.ins + self.outs

    def converted(self, dtype: str) -> bool:
        """True if buffers of ``dtype`` reach the kernel as float32 copies."""
        return self.half == "float32" and dtype in HALF_DTYPES

    def view_dtype(self, dtype: str) -> str:
        """The dtype the kernel sees for a buffer of ``dtype``."""
        if dtype in HALF_DTYPES:
            return "float32" if self.half == "float32" else "uint16"
        return dtype

    def shared_temp(self, out_index: int) -> int | None:
        """The input whose float32 copy output ``out_index`` shares, if any."""
        for i, o in self.aliases:
            both = self.converted(self.ins[i][0]) and self.converted(self.outs[o][0])
            if o == out_index and both:
                return i
        return None
