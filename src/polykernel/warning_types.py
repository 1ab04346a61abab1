"""The warning classes polykernel emits (re-exported by :mod:`polykernel.errors`,
whose ``__all__`` lists them with the exceptions)::

    PolykernelWarning ............................ UserWarning
    ├── CacheWarning, DuplicatePrimitiveWarning, BenchmarkMismatchWarning,
    │   BackendPreferenceWarning, TuningWarning
    │   └── JobFallbackWarning
    └── PolykernelDeprecationWarning ............. + DeprecationWarning
"""

from __future__ import annotations

__all__ = [
    "BackendPreferenceWarning",
    "BenchmarkMismatchWarning",
    "CacheWarning",
    "DuplicatePrimitiveWarning",
    "JobFallbackWarning",
    "PolykernelDeprecationWarning",
    "PolykernelWarning",
    "TuningWarning",
]


class PolykernelWarning(UserWarning):
    """Base class of every warning polykernel emits."""


class CacheWarning(PolykernelWarning):
    """The cache could not be used for one operation; it ran without it (a miss)."""


class DuplicatePrimitiveWarning(PolykernelWarning):
    """A second primitive was created under a name already in the registry."""


class BenchmarkMismatchWarning(PolykernelWarning):
    """Two backends of one primitive disagreed on the same benchmark inputs."""


class BackendPreferenceWarning(PolykernelWarning):
    """A process-wide ``set_backend`` choice is not registered for a primitive."""


class PolykernelDeprecationWarning(PolykernelWarning, DeprecationWarning):
    """A name, file or command polykernel still honours will go away; the message
    names what replaces it."""


class TuningWarning(PolykernelWarning):
    """A tuned table was ignored, or a call found no tuned entry (when asked)."""


class JobFallbackWarning(TuningWarning):
    """The processes of a ``jax.distributed`` job could not agree on a tuned table
    (or could not finish tuning together): every process uses the untuned
    defaults (or saves nothing). The message says why."""
