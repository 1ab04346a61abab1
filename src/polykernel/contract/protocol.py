"""The backend protocol: what a kernel technology tells polykernel about itself.

A *backend* is a kernel technology (``numba``, ``warp``, a user's own). It has two
halves:

- a :class:`Backend` object (one per technology, registered in the backend table,
  :mod:`polykernel.backends`): its name, the platforms it has a path for, how to
  install it, whether it is usable here, what its lowering needs around it, which
  XLA target names it registers and how it brings them back in a new process;
- its kernel wrappers (``warp_kernel(...)`` and the like), whose callables derive
  from :class:`~polykernel.contract.kernel.BackendKernel`: there the core normalises
  ``outs``, aliases and ``vmap_method``, converts every scalar keyword through the one
  refusing converter, picks the CPU or GPU path, and the backend supplies only how it
  builds, fetches and calls its artefact on a platform.

Generic code asks a :class:`Backend` instead of comparing backend names. Every method
has a default, so a minimal backend is just
``Backend(name="mine", platforms=("cpu",))``.

Example:
    >>> from polykernel import Backend
    >>> b = Backend(name="mine", platforms=("cpu",), summary="my kernels")
    >>> b.name, b.usable("cpu")
    ('mine', (True, 'my kernels'))
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..platforms import Platform
from .backend_fields import check_fields

__all__ = ["Backend", "InfoRow"]

#: One row of ``polykernel info``: ``(backend, platform, usable, detail)``.
InfoRow = tuple[str, str, bool, str]


@dataclass
class Backend:
    """A kernel technology, as the rest of polykernel sees it.

    Attributes:
        name: the backend name used by ``def_kernel``, ``backend=`` and the benchmark.
        platforms: the platforms its kernels have a path for.
        summary: one line saying what it is.
        extra: the pip extra that installs it (``pip install "polykernel[extra]"``),
            or None when nothing needs installing.
        modules: the importable modules it needs (checked without importing them).
        reference: a pure-JAX reference implementation (compared against by
            ``check_kernel`` and the benchmark when present).
        target_pattern: a regular expression matching every XLA FFI target name
            it registers (None: it registers none of its own).
        reviver: ``"module:function"`` of its ``revive(target, program)``,
            imported only when a target is revived (None: it cannot revive).

    Raises:
        KernelTypeError: a field has the wrong type (``name=None``,
            ``platforms="cpu"``, ``modules="numpy"``).
        KernelRegistrationError: a field has a bad value: a name that is not a
            Python identifier, a platform outside ``cpu``/``gpu``/``tpu``, a
            ``target_pattern`` that is not a regular expression, a ``reviver`` that is
            not ``"module:function"`` (see :mod:`.backend_fields`).
    """

    name: str
    platforms: Sequence[str] = (Platform.CPU,)
    summary: str = ""
    extra: str | None = None
    modules: Sequence[str] = ()
    reference: bool = False
    target_pattern: str | None = None
    reviver: str | None = None

    def __post_init__(self) -> None:
        # Refused here, naming the field, rather than where the value is first read
        # (the table, a lowering, another process's load_exported).
        check_fields(self)

    # -- availability ---------------------------------------------------------------
    def install_hint(self) -> str:
        """How to install what the backend needs."""
        if self.extra is None:
            return "nothing to install"
        return f'pip install "polykernel[{self.extra}]"'

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        """Whether its kernels can run on ``platform`` here, and a one-line reason.

        The default checks that :attr:`modules` are importable (without importing
        them) and, for ``gpu``, that a GPU is visible (``gpu``).
        """
        for module in self.modules:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                return False, f"not installed ({self.install_hint()})"
        if Platform(platform) not in self.platforms:
            return False, f"no {platform} path"
        if platform == Platform.GPU and not gpu:
            return False, f"{self.summary}; no GPU visible to JAX"
        return True, self.summary

    def info_rows(self, gpu: bool) -> list[InfoRow]:
        """Its rows of ``polykernel info``: one per platform it has a path for."""
        return [(self.name, str(p), *self.usable(p, gpu)) for p in self.platforms]

    # -- lowering --------------------------------------------------------------------
    def lowering_context(self, platform: str) -> contextlib.AbstractContextManager[Any]:
        """What lowering one of its kernels for ``platform`` needs around it."""
        return contextlib.nullcontext()

    # -- targets in a new process ----------------------------------------------------
    def revive(self, target: str, program: str) -> bool:
        """Register ``target`` (a name matching :attr:`target_pattern`) from the cache
        alone, in a process that never built it; False when it cannot.

        ``program`` is the exported program's text. May raise our errors to say what
        the user must do (e.g. import the module defining the kernel).
        """
        if self.reviver is None:
            return False
        module, _, function = self.reviver.partition(":")
        return bool(getattr(importlib.import_module(module), function)(target, program))
