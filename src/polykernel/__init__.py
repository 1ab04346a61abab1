"""polykernel: one JAX primitive, many kernel technologies."""

from ._version import __version__ as __version__
