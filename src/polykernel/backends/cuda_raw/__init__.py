"""The ``cuda_raw`` backend: raw C++/CUDA kernels as XLA FFI targets.

- :mod:`.loader`, :mod:`.directory`: ``load_cpp_inline``/``load_cpp_file``/
  ``load_cuda_inline``/``load_cuda_file``/``load_cuda_dir`` (the reference's
  signatures), resolved into a typed :class:`~.request.LoadRequest`;
- :mod:`.argspec`, :mod:`.signature`, :mod:`.annotations`, :mod:`.tokens`: which C++
  parameter is an input, an output, the stream or an attribute;
- :mod:`.codegen`: the generated FFI handlers; :mod:`.build`: build (through
  :mod:`polykernel.native.build`) and register (through
  :mod:`polykernel.ffi.targets`);
- :mod:`.kernel`, :mod:`.compiled`: what ``load_*`` returns; :mod:`.runtime`:
  ``register_ffi_target`` by hand; :mod:`.revive`: targets from the cache in a new
  process; :mod:`.backend`: the backend's protocol object.

Importing this package runs no compiler, touches no disk and imports none of its
modules: each public name is imported from its module when first asked for, so the
backend table's ``backend`` (looked up when a primitive's kernels are chosen) and a
``load_cpp_inline`` of a cached module import only what they use. See
``docs/native.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .compiled import CompiledModule
    from .directory import load_cuda_dir
    from .kernel import NativeFunction, NativeModule
    from .loader import (
        load_cpp_file,
        load_cpp_inline,
        load_cuda_file,
        load_cuda_inline,
    )
    from .runtime import register_ffi_target
    from .tokens import normalize_tokens

#: public name -> the module of this package that defines it.
_LAZY = {
    "CompiledModule": "compiled",
    "NativeFunction": "kernel",
    "NativeModule": "kernel",
    "load_cpp_file": "loader",
    "load_cpp_inline": "loader",
    "load_cuda_dir": "directory",
    "load_cuda_file": "loader",
    "load_cuda_inline": "loader",
    "normalize_tokens": "tokens",
    "register_ffi_target": "runtime",
}

__all__ = [
    "CompiledModule",
    "NativeFunction",
    "NativeModule",
    "load_cpp_file",
    "load_cpp_inline",
    "load_cuda_dir",
    "load_cuda_file",
    "load_cuda_inline",
    "normalize_tokens",
    "register_ffi_target",
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
