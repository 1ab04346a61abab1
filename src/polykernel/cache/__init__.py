"""The on-disk cache: one entry store shared by every section (see ``docs/cache.md``).

- :mod:`.store`: the root, its read-only tiers, content keys, regular files only;
- :mod:`.entries`: verified entries, published atomically;
- :mod:`.locks`: one OS file lock per entry (builders and admin commands);
- :mod:`.admin`: ``info``, ``prune``, ``clear`` over every section.

The sections live with what they cache: native libraries (``native/cache.py``),
Numba handlers (``backends/numba/cache.py``), Warp objects
(``backends/warp/cache.py``) and the GPU launcher's images (``launcher/cache.py``).
"""
