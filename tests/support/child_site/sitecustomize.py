"""Test processes only: fewer cyclic garbage collections.

The test run puts this folder first on ``PYTHONPATH`` (``tests/conftest.py``), so
every Python process of the run starts with it: the pytest-xdist workers, the
zygotes (``zygote.py``) and every child a test starts with the run's environment.
Python's default thresholds (700, 10, 10) collect the youngest generation every 700
new container objects; importing JAX, NumPy and Numba makes hundreds of thousands,
and a test child spent ~0.2-0.3 s of its ~1 s in the collector (a full run: ~49
CPU-s of ~730 inside collections, measured with ``gc.callbacks``; more in what
they evict from the CPU's caches). Collections stay automatic, only
rarer; what they collect and when a reference count frees an object are unchanged.
A process started without the run's ``PYTHONPATH`` (a bare virtualenv of a hermetic
test) keeps Python's defaults.
"""

import gc

#: Youngest generation every 50,000 new objects, the next two every 50 of the one
#: below. A full run on 2 cores (JAX 0.10, with ``gc.freeze`` in the workers and
#: zygotes): 725 -> 643 CPU-s, 385-389 -> 340 s.
THRESHOLDS = (50_000, 50, 50)

gc.set_threshold(*THRESHOLDS)
