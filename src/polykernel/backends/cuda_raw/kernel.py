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

from ...contract.kernel import BackendKernel
from ...contract.outs import PER_CALL, OutSpec, normalize_outs
from ...contract.scalars import Scalars
from ...errors import KernelCallError
from ...platforms import LoweringPlatform, platform_of
from .argspec import FunctionSpec
from .compiled import CompiledModule

__all__ = ["NativeFunction", "NativeModule"]


class NativeFunction(BackendKernel):
    """One exported function: ``fn(*inputs, outs=..., **attributes)``.

    Attributes:
        target: the FFI target this build is registered under (content-versioned).
        public_target: ``"<module>.<function>"``, the documented raw ``ffi_call`` name.
        spec: the function's resolved
            :class:`~polykernel.backends.cuda_raw.argspec.FunctionSpec`.
        handler_address: address of its XLA FFI handler (see
            :func:`polykernel.ffi.metadata.query_metadata`).
    """

    backend = "cuda_raw"
    sequence = list  # results for a list of outs come back as a list

    def __init__(
        self,
        module: str,
        spec: FunctionSpec,
        target: str,
        public: str,
        vmap: str,
        handler_address: int = 0,
        platform: LoweringPlatform = LoweringPlatform.CPU,
    ) -> None:
        super().__init__(
            module,
            spec.name,
            PER_CALL,
            platforms=(platform_of(platform),),
            vmap_method=vmap,
        )
        self.where = f"{module}.{spec.name}"
        self.module = module
        self.spec = spec
        self.target = target
        self.public_target = public
        self.handler_address = handler_address

    def __repr__(self) -> str:
        return f"<NativeFunction {self.where}{self.spec.tokens()} -> {self.target}>"

    def __call__(self, *args: Any, outs: Any, **attrs: Any) -> Any:
        spec = self.spec
        if len(args) != len(spec.args):
            raise KernelCallError(
                f"{self.where}: expected {len(spec.args)} input array(s) "
                f"(spec {spec.tokens()}), got {len(args)}."
            )
        single = hasattr(outs, "shape") and hasattr(outs, "dtype")
        if not single and not isinstance(outs, list | tuple):
            raise KernelCallError(
                f"{self.where}: `outs` must be a jax.ShapeDtypeStruct or a list of "
                f"them, one per 'ret' (got {type(outs).__name__}: {outs!r})."
            )
        out_spec = normalize_outs(self.where, outs)
        if len(out_spec) != len(spec.rets):
            raise KernelCallError(
                f"{self.where}: expected {len(spec.rets)} output spec(s) in `outs`, "
                f"got {len(out_spec)}; pass one jax.ShapeDtypeStruct per 'ret'."
            )
        return self.run(args, attrs, out_spec)

    # -- the backend's half of the contract -------------------------------------------
    def scalar_dtype(self, name: str, value: Any) -> Any:
        return _np_dtype(self.spec.attr_types()[name])

    def convert_scalars(self, scalars: dict[str, Any]) -> Scalars:
        if set(scalars) != {p.name for p in self.spec.attrs}:
            raise self._attribute_mismatch(set(scalars))
        return super().convert_scalars(scalars)

    def _attribute_mismatch(self, given: set[str]) -> KernelCallError:
        expected = self.spec.attr_types()
        unknown = sorted(given - set(expected))
        missing = sorted(set(expected) - given)
        listing = ", ".join(f"{k}: {t}" for k, t in expected.items()) or "none"
        return KernelCallError(
            f"{self.where}: attribute mismatch (unknown: {unknown or 'none'}, "
            f"missing: {missing or 'none'}); expected attributes: {listing}."
        )

    def prepare(self, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec) -> None:
        for i, (p, a) in enumerate(zip(self.spec.args, arrays, strict=True)):
            self._check_buffer("input", i, p, a.dtype, a.ndim)
        for i, (p, o) in enumerate(zip(self.spec.rets, outs.structs, strict=True)):
            self._check_buffer("output", i, p, np.dtype(o.dtype), len(o.shape))

    def emit(self, platform, arrays, scalars: Scalars, outs: OutSpec) -> list[Any]:
        import jax

        call = jax.ffi.ffi_call(
            self.target, list(outs.structs), vmap_method=self.vmap_method
        )
        return list(call(*arrays, **dict(scalars)))

    def _check_buffer(
        self, role: str, i: int, p: Any, dtype: np.dtype, ndim: int
    ) -> None:
        if p.dtype is not None and np.dtype(dtype) != _np_dtype(p.dtype):
            raise KernelCallError(
                f"{self.where}: {role} {i} has dtype {np.dtype(dtype).name}, the "
                f"spec pins {p.dtype} ('{p.token()}'); cast it, e.g. "
                f"x.astype(jnp.{p.dtype})."
            )
        if p.rank is not None and ndim != p.rank:
            raise KernelCallError(
                f"{self.where}: {role} {i} has rank {ndim}, the spec pins rank "
                f"{p.rank} ('{p.token()}')."
            )


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

    def library_symbol(self, symbol: str) -> Any:
        """The ctypes function ``symbol`` of this build's library."""
        return getattr(self._handle, symbol)

    def target(self, function: str) -> str:
        """The FFI target name this build's ``function`` is registered under."""
        return getattr(self, function).target

    def __repr__(self) -> str:
        return (
            f"<NativeModule {self.name!r} ({self.platform}) "
            f"functions={sorted(self.functions)} key={self.key[:12]}>"
        )
