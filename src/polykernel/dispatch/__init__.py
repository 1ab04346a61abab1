"""The one decision of which kernel a lowering runs, and the one table it reads.

- :mod:`.precedence`: the order of the sources that decide (call, ``set_backend``,
  ``set_default``, tuned, saved default, registered), stated once;
- :mod:`.decide`: :func:`decide`, the only place that decides, over plain data;
- :mod:`.lookup`: which table entry answers a call (fresh entries only);
- :mod:`.key`: the key of a call (device, signature, shape bucket);
- :mod:`.identity`: which kernel an entry measured (code digest and versions);
- :mod:`.ranking`: the one rule for "fastest", shared by the tuner and the
  benchmark's saved defaults;
- :mod:`.records`, :mod:`.values`: the typed records of a table and their exact
  JSON form;
- :mod:`.table`, :mod:`.files`, :mod:`.legacy`: the tables on disk (the user's,
  shipped ones, the old saved defaults) and how they are read and written;
- :mod:`.notices`: misses and warnings that follow from a decision.

It sits between ``settings/`` (paths, preferences) and the layers that use it
(``tuning/``, ``benchmark/``, ``core/``), and holds no JAX internals.
"""

from __future__ import annotations

from .decide import Call, Dispatch, decide
from .key import device_identity, make_key
from .lookup import Registered
from .notices import misses
from .precedence import LEVELS, Reason
from .records import Choice, Entry, Key, Measurement, Scope

__all__ = [
    "LEVELS",
    "Call",
    "Choice",
    "Dispatch",
    "Entry",
    "Key",
    "Measurement",
    "Reason",
    "Registered",
    "Scope",
    "decide",
    "device_identity",
    "make_key",
    "misses",
]
