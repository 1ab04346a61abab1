"""A plugin module that cannot be imported (its dependency is missing)."""

import pk_no_such_dependency  # noqa: F401

BACKEND = None
