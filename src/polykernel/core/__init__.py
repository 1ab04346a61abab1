"""The core: one JAX primitive backed by kernels of many backends.

- :mod:`.primitive`: ``XLACustomKernel`` and its wiring into JAX's rule tables;
- :mod:`.primitive_info`: what tools know about a primitive (call function, tags,
  benchmark data, ``benchmark()``);
- :mod:`.kernel_table`: kernel generators per platform and backend, and defaults;
- :mod:`.lowering`: the per-platform lowering rule;
- :mod:`.transforms`: the default ``vmap`` rule and per-input JVPs;
- :mod:`.registry`: every primitive a program defined, by name;
- :mod:`.exporting`: ``jax.export`` and revival in a new process.
"""
