"""A curated set of example primitives, each with every backend usable here.

Importing this package defines (and registers) the primitives; ``import polykernel``
does not import it. Each primitive has a pure-JAX reference backend (``jax_raw``), a
Numba backend when numba is installed, a C++ backend (``cuda_raw`` on ``cpu``)
when a host C++ compiler is found, a Warp backend (``cpu`` and ``gpu``) for
``scaled_add``, ``lif_step`` and ``csrmv`` when warp-lang is installed, plus a
call function and benchmark data; ``scaled_add``, ``csrmv`` and ``event_csrmv``
declare tunable launch parameters, and every primitive ships the tuned table
measured on this project's machine (``catalog/tuned/cpu.json``).

Example:
    >>> from polykernel import catalog
    >>> sorted(p.name for p in catalog.PRIMITIVES)[:1]
    ['polykernel.catalog.csrmv']
"""

from __future__ import annotations

from pathlib import Path

from . import _support, _warp
from .csrmv import csrmv, csrmv_p
from .elementwise import scaled_add, scaled_add_p
from .event_csrmv import event_csrmv, event_csrmv_p
from .lif import lif_step, lif_step_p

if _support.has_warp():  # Warp itself is imported on first use only
    _warp.register(scaled_add_p, lif_step_p, csrmv_p)

PRIMITIVES = (scaled_add_p, csrmv_p, event_csrmv_p, lif_step_p)

# The tuned tables this project measured (benchmarks/ship_catalog_tables.py), read on
# first use: a machine like it dispatches each call to its measured winner, others
# fall back to the defaults until `polykernel tune polykernel.catalog` (docs/tuning.md).
for _primitive in PRIMITIVES:
    _primitive.def_tuned_table(Path(__file__).parent / "tuned" / "cpu.json")

__all__ = [
    "PRIMITIVES",
    "csrmv",
    "csrmv_p",
    "event_csrmv",
    "event_csrmv_p",
    "lif_step",
    "lif_step_p",
    "scaled_add",
    "scaled_add_p",
]
