"""What ``load_*`` returns: a module whose functions are callable from JAX.

``mod.vector_add(a, b, outs=jax.ShapeDtypeStruct(a.shape, a.dtype), alpha=2.0)``
checks the inputs and attributes against the function's spec, then binds
``jax.ffi.ffi_call`` on this build's content-versioned target. It works eagerly,
under ``jit`` and under ``vmap`` (``vmap_method="sequential"`` by default: one
kernel call per batch element, which is correct for any kernel).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..attribute_values import convert_attribute
from ..errors import KernelCallError
from .argspec import FunctionSpec
from .compiled import CompiledModule

__all__ = ["NativeFunction", "NativeModule"]


class NativeFunction:
    """One exported function: ``fn(*inputs, outs=..., **attributes)``.

    Attributes:
        target: the FFI target this build is registered under (content-versioned).
        public_target: ``"<module>.<function>"``, the documented raw ``ffi_call`` name.
        spec: the function's resolved :class:`~polykernel.native.argspec.FunctionSpec`.
        handler_address: address of its XLA FFI handler (see
            :func:`polykernel.ffi.metadata.query_metadata`).
    """

    def __init__(
        self,
        module: str,
        spec: FunctionSpec,
        target: str,
        public: str,
        vmap: str,
        handler_address: int = 0,
    ) -> None:
        self.module = module
        self.spec = spec
        self.target = target
        self.public_target = public
        self.vmap_method = vmap
        self.handler_address = handler_address
        self._where = f"{module}.{spec.name}"

    def __repr__(self) -> str:
        return f"<NativeFunction {self._where}{self.spec.tokens()} -> {self.target}>"

    def __call__(self, *args: Any, outs: Any, **attrs: Any) -> Any:
        import jax
        import jax.numpy as jnp

        spec = self.spec
        if len(args) != len(spec.args):
            raise KernelCallError(
                f"{self._where}: expected {len(spec.args)} input array(s) "
                f"(spec {spec.tokens()}), got {len(args)}."
            )
        single = hasattr(outs, "shape") and hasattr(outs, "dtype")
        out_list = (
            [outs] if single else list(outs) if isinstance(outs, list | tuple) else None
        )
        if out_list is None or not all(
            hasattr(o, "shape") and hasattr(o, "dtype") for o in out_list
        ):
            raise KernelCallError(
                f"{self._where}: `outs` must be a jax.ShapeDtypeStruct or a list of "
                f"them, one per 'ret' (got {type(outs).__name__}: {outs!r})."
            )
        if len(out_list) != len(spec.rets):
            raise KernelCallError(
                f"{self._where}: expected {len(spec.rets)} output spec(s) in `outs`, "
                f"got {len(out_list)}; pass one jax.ShapeDtypeStruct per 'ret'."
            )
        arrays = [jnp.asarray(a) for a in args]
        for i, (p, a) in enumerate(zip(spec.args, arrays, strict=True)):
            self._check_buffer("input", i, p, a.dtype, a.ndim)
        for i, (p, o) in enumerate(zip(spec.rets, out_list, strict=True)):
            self._check_buffer("output", i, p, np.dtype(o.dtype), len(o.shape))
        call = jax.ffi.ffi_call(self.target, out_list, vmap_method=self.vmap_method)
        result = call(*arrays, **self._attributes(attrs))
        return result[0] if single else result

    def _check_buffer(
        self, role: str, i: int, p: Any, dtype: np.dtype, ndim: int
    ) -> None:
        if p.dtype is not None and np.dtype(dtype) != _np_dtype(p.dtype):
            raise KernelCallError(
                f"{self._where}: {role} {i} has dtype {np.dtype(dtype).name}, the "
                f"spec pins {p.dtype} ('{p.token()}'); cast it, e.g. "
                f"x.astype(jnp.{p.dtype})."
            )
        if p.rank is not None and ndim != p.rank:
            raise KernelCallError(
                f"{self._where}: {role} {i} has rank {ndim}, the spec pins rank "
                f"{p.rank} ('{p.token()}')."
            )

    def _attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        import jax

        expected = {p.name: p.dtype for p in self.spec.attrs}
        unknown = sorted(set(attrs) - set(expected))
        missing = sorted(set(expected) - set(attrs))
        if unknown or missing:
            listing = ", ".join(f"{k}: {t}" for k, t in expected.items()) or "none"
            raise KernelCallError(
                f"{self._where}: attribute mismatch (unknown: {unknown or 'none'}, "
                f"missing: {missing or 'none'}); expected attributes: {listing}."
            )
        out = {}
        for name, value in attrs.items():
            if isinstance(value, jax.core.Tracer):
                raise KernelCallError(
                    f"{self._where}: attribute '{name}' is a traced value; attributes "
                    "are compile-time constants. Mark it static (static_argnames) or "
                    "pass it as an input array instead."
                )
            dtype = _np_dtype(expected[name])
            out[name] = convert_attribute(self._where, name, value, dtype)
        return out


def _np_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class NativeModule(CompiledModule):
    """A compiled, registered native module; each function is an attribute.

    Attributes:
        name: the module name given to ``load_*``.
        platform: ``"cpu"`` or ``"cuda"``.
        key: the cache key (SHA-256) of this build.
        library: path of the loaded shared library.
        built: whether this process ran the compiler (``False`` on a cache hit).
    """

    def __init__(
        self,
        name: str,
        platform: str,
        key: str,
        library: str,
        built: bool,
        functions: Sequence[NativeFunction],
        handle: Any,
    ) -> None:
        self.name = name
        self.platform = platform
        self.key = key
        self.library = library
        self.built = built
        self.functions = {f.spec.name: f for f in functions}
        self._handle = handle  # keeps the dlopen'ed library alive

    def __getattr__(self, item: str) -> NativeFunction:
        functions = self.__dict__.get("functions", {})
        if item in functions:
            return functions[item]
        raise AttributeError(
            f"native module '{self.__dict__.get('name')}' has no function {item!r}; "
            f"it exports {sorted(functions)}."
        )

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.functions]

    def target(self, function: str) -> str:
        """The FFI target name this build's ``function`` is registered under."""
        return getattr(self, function).target

    def __repr__(self) -> str:
        return (
            f"<NativeModule {self.name!r} ({self.platform}) "
            f"functions={sorted(self.functions)} key={self.key[:12]}>"
        )
