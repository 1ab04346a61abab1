"""One module per kernel technology; each turns a user kernel into a JAX callable.

Backend modules import their optional package (numba, warp, triton, ...) inside
functions only, so importing this package never imports them.
"""
