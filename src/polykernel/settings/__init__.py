"""Process-wide settings: where things live and the knobs users turn.

- :mod:`.paths`: the cache and config directories, on/off environment variables;
- :mod:`.preferences`: the reference API's ``config.*`` setters (backend, Numba,
  CUDA architecture);
- :mod:`.cuda_arch`: CUDA architecture names;
- :mod:`.host`: the host CPU's model and instruction-set family;
- :mod:`.allocator`: the opt-in C allocator tuning.

:mod:`polykernel.config` is the public face of these. Measured choices (tuned
entries, saved defaults) are not settings: they live in :mod:`polykernel.dispatch`.
"""
