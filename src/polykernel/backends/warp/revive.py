"""Warp's CPU targets in a new process (filled in below)."""

from __future__ import annotations

__all__ = ["revive"]


def revive(target: str, program: str = "") -> bool:
    """Register Warp CPU target ``target`` from the cache; False when it cannot."""
    del target, program
    return False
