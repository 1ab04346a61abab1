"""An out-of-tree backend, written as a user would: C functions reached through ctypes.

Only polykernel's public protocol is used: a :class:`polykernel.Backend` (what the
technology is), a :class:`polykernel.BackendKernel` subclass (what a call emits),
and :func:`polykernel.register_backend` — or the ``polykernel.backends`` entry
point, see ``tests/contract/test_out_of_tree_backend.py``. The kernel *declares* its
scalar parameters and output dtypes; everything else — ``outs``, aliases,
``vmap_method`` defaults, unknown or missing keywords, scalar values through the one
refusing converter, the eager cache, platform choice — comes from the core.

A kernel is a C function ``void f(const float* x, float* out, int64_t n, <scalars>)``
compiled with the system C compiler; on the CPU it runs behind
``jax.pure_callback`` (a plugin with a native FFI handler would register it through
``polykernel.ffi.targets`` instead).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

import polykernel as pk

NAME = "ctypes_c"
_C_TYPES = {"float32": ctypes.c_float, "int32": ctypes.c_int32, "bool": ctypes.c_bool}


class CtypesBackend(pk.Backend):
    """C functions through ctypes: usable wherever a C compiler is."""

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if platform != "cpu" or compiler is None:
            return False, "needs a C compiler and the CPU"
        return True, f"{self.summary} ({compiler})"


BACKEND = CtypesBackend(
    name=NAME, platforms=("cpu",), summary="C functions through ctypes (a test plugin)"
)


def compile_c(source: str, function: str) -> Any:
    """Compile ``source`` into a shared library; return ``function`` from it.

    The folder is removed once the library is loaded (a loaded library stays
    mapped after its file is gone), so no run leaves it in the temp dir.
    """
    with tempfile.TemporaryDirectory(prefix="pk_ctypes_") as directory:
        src, lib = os.path.join(directory, "k.c"), os.path.join(directory, "k.so")
        with open(src, "w") as fh:
            fh.write(source)
        cc = shutil.which(os.environ.get("CC", "cc")) or "gcc"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", src, "-o", lib], check=True)
        return getattr(ctypes.CDLL(lib), function)


class CtypesKernel(pk.BackendKernel):
    """``f(*arrays, **scalars)`` running one C function on float32 buffers."""

    backend = NAME

    def __init__(self, function: Any, outs: Any, scalars: Mapping[str, str],
                 vmap_method: str | None = None,
                 input_output_aliases: Mapping[int, int] | None = None,
                 ) -> None:  # fmt: skip
        # Declared, not checked here: the core binds the keywords to `scalars` and
        # refuses outputs that are not float32 (what the C functions write).
        super().__init__("ctypes_kernel", function.__name__, outs, platforms=("cpu",),
                         vmap_method=vmap_method,
                         input_output_aliases=input_output_aliases,
                         parameters=dict(scalars), out_dtypes=("float32",))  # fmt: skip
        self.function = function

    def emit(self, platform: Any, arrays: Sequence[Any], scalars: Any,
             outs: Any) -> list[Any]:  # fmt: skip
        values = [_C_TYPES[v.dtype.name](v.item()) for _, v in scalars]

        def host(*xs: np.ndarray) -> list[np.ndarray]:
            # Elementwise: every batch element at once, as one flat buffer.
            ins = [np.ascontiguousarray(x, np.float32) for x in xs]
            out = np.zeros(ins[0].shape, np.float32)
            pointers = [x.ctypes.data_as(ctypes.c_void_p) for x in (*ins, out)]
            self.function(*pointers, ctypes.c_int64(out.size), *values)
            return [out]

        return list(jax.pure_callback(host, list(outs.structs), *arrays,
                                      vmap_method=self.vmap_method))  # fmt: skip


def ctypes_kernel(function: Any, outs: Any, scalars: Mapping[str, str] | None = None,
                  *, vmap_method: str | None = None,
                  input_output_aliases: Mapping[int, int] | None = None,
                  ) -> CtypesKernel:  # fmt: skip
    """Wrap a ctypes C function as a kernel (the plugin's ``*_kernel`` wrapper)."""
    return CtypesKernel(function, outs, scalars or {}, vmap_method,
                        input_output_aliases)  # fmt: skip
