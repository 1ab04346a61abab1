"""The ``jax_raw`` backend: a pure-JAX kernel, the reference the others are checked
against.

A ``jax_raw`` generator returns a JAX-traceable function, lowered as it is: no
artefact, no FFI target, every platform. :mod:`.backend` holds its protocol object.
"""
