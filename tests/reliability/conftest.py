"""Reliability suite: Hypothesis profiles (the bad-input count is in tests/conftest.py).

Every bad-input case is a row of a parametrised table and carries the
``bad_input`` marker; ``tests/conftest.py`` counts them and the terminal summary
prints how many ran and how many failed (``reliability: N bad-input cases, F
failed``; counted on the controller, so it also works with pytest-xdist).
``pytest tests/reliability --collect-only -q -m bad_input`` lists them.

Hypothesis profiles (``POLYKERNEL_HYPOTHESIS_PROFILE``):

- ``ci`` (default): few derandomised examples, so the suite stays fast and
  reproducible in CI;
- ``long``: many random examples; the ``slow``-marked long variants of the
  property tests run only under this profile, e.g.
  ``POLYKERNEL_HYPOTHESIS_PROFILE=long pytest tests/reliability -m slow``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE_ENV = "POLYKERNEL_HYPOTHESIS_PROFILE"
_COMMON = {
    "deadline": None,  # the first example of a new signature compiles a kernel
    "database": None,  # nothing written to the working tree
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
# CI: no shrinking (each shrink step may compile a kernel); the failing example is
# reported as drawn. The long profile shrinks to a minimal example.
settings.register_profile(
    "ci",
    max_examples=8,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    **_COMMON,
)
settings.register_profile("long", max_examples=300, **_COMMON)
settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))
