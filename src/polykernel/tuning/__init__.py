"""The tuner behind ``XLACustomKernel.tune`` (see ``docs/tuning.md``).

- :mod:`.session`: one ``tune()`` call: platforms, cases, candidates, saving;
- :mod:`.runner`: one platform: capture the binds, check each candidate against the
  reference on fresh buffers, time the survivors, pick the winners;
- :mod:`.capture`: what a primitive is bound with when its call function runs;
- :mod:`.first_call`: a candidate's first call, in a worker with a deadline;
- :mod:`.results`: a case's timings as measured candidates and a table entry;
- :mod:`.candidates`: every (backend, launch parameters), in budget order;
- :mod:`.report`: :class:`TuneReport`, what a run found.

It works on any object with the primitive's methods, so it sits below the core.
"""

from __future__ import annotations

from .candidates import Candidate
from .report import Measured, TunedCase, TuneReport

__all__ = ["Candidate", "Measured", "TuneReport", "TunedCase"]
