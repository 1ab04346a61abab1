"""The contract every backend goes through: one place per guarantee.

- :mod:`.outs`: ``outs`` and inputs (:func:`normalize_outs`, :func:`as_array`);
- :mod:`.options`: ``vmap_method`` and ``input_output_aliases``, one default;
- :mod:`.parameters`: a kernel's declared keyword parameters, bound by one rule;
- :mod:`.scalars`: the one refusing converter of scalar keywords;
- :mod:`.launch`: grid, block, launch dims and counts, one set of rules;
- :mod:`.keywords`: a primitive call's reserved and hashable keywords;
- :mod:`.protocol`: :class:`Backend`, what a kernel technology declares;
- :mod:`.kernel`: :class:`BackendKernel`, the base of every wrapper's callable;
- :mod:`.memo`: the one "signature -> target" memo of a kernel.

These are public (``polykernel.Backend``, ``polykernel.BackendKernel``): a backend
written outside polykernel builds on them and gets every guarantee. See
``docs/architecture.md``.
"""

from __future__ import annotations

from .kernel import BackendKernel
from .launch import launch_count, launch_shape, power_of_two
from .options import VMAP_METHODS, check_alias_inputs, check_aliases
from .outs import OutSpec, as_array, normalize_outs
from .parameters import INFERRED, STATIC, Parameter, Parameters
from .protocol import Backend, InfoRow
from .scalars import Scalars, convert_attribute, convert_scalars, inferred_dtype

__all__ = [
    "INFERRED",
    "STATIC",
    "VMAP_METHODS",
    "Backend",
    "BackendKernel",
    "InfoRow",
    "OutSpec",
    "Parameter",
    "Parameters",
    "Scalars",
    "as_array",
    "check_alias_inputs",
    "check_aliases",
    "convert_attribute",
    "convert_scalars",
    "inferred_dtype",
    "launch_count",
    "launch_shape",
    "normalize_outs",
    "power_of_two",
]
