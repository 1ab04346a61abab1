"""A curated set of example primitives, each with every backend usable here.

Importing this package defines (and registers) the primitives; ``import polykernel``
does not import it. Each primitive has a pure-JAX reference backend (``jax_raw``), a
Numba backend when numba is installed and a C++ backend (``cuda_raw`` on ``cpu``)
when a host C++ compiler is found, plus a call function and benchmark data.

Example:
    >>> from polykernel import catalog
    >>> sorted(p.name for p in catalog.PRIMITIVES)[:1]
    ['polykernel.catalog.csrmv']
"""

from __future__ import annotations

from .csrmv import csrmv, csrmv_p
from .elementwise import scaled_add, scaled_add_p
from .event_csrmv import event_csrmv, event_csrmv_p
from .lif import lif_step, lif_step_p

PRIMITIVES = (scaled_add_p, csrmv_p, event_csrmv_p, lif_step_p)

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
