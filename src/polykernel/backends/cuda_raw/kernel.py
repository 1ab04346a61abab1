"""What ``load_*`` returns: a module whose functions are callable from JAX.

``mod.vector_add(a, b, outs=jax.ShapeDtypeStruct(a.shape, a.dtype), alpha=2.0)``
checks the inputs and attributes against the function's spec, then binds
``jax.ffi.ffi_call`` on this build's content-versioned target. It works eagerly,
under ``jit`` and under ``vmap`` (``vmap_method="sequential"`` by default: one
kernel call per batch element, which is correct for any kernel).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...contract.kernel import BackendKernel
from ...contract.outs import PER_CALL, OutSpec
from ...contract.parameters import Parameters
from ...contract.scalars import Scalars
from ...errors import KernelCallError
from ...ffi import abi
from ...platforms import LoweringPlatform, platform_of
from ...types import VmapMethod
from .argspec import FunctionSpec
from .compiled import CompiledModule

__all__ = ["NativeFunction", "NativeModule"]


_KEEP = object()


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
        vmap: object,
        handler_address: int = 0,
        platform: LoweringPlatform = LoweringPlatform.CPU,
        input_output_aliases: Mapping[int, int] | None = None,
    ) -> None:
        super().__init__(
            module,
            spec.name,
            PER_CALL,  # outs=... is a keyword of every call
            platforms=(platform_of(platform),),
            vmap_method=vmap,
            input_output_aliases=input_output_aliases,
            # The spec's attributes, with their declared types.
            parameters=Parameters.declared(
                {k: _np_dtype(t) for k, t in spec.attr_types().items()}
            ),
            out_dtypes=abi.DTYPE_CODES,  # what crosses the XLA FFI
        )
        self.where = f"{module}.{spec.name}"
        self.module = module
        self.spec = spec
        self.target = target
        self.public_target = public
        self.handler_address = handler_address
        self._platform = platform

    def variant(
        self,
        *,
        vmap_method: VmapMethod | object | None = _KEEP,
        input_output_aliases: Mapping[int, int] | None = None,
    ) -> NativeFunction:
        """This build's function with other call options, checked by the rules of
        every kernel wrapper: ``vmap_method`` (left out: the module's; None: the
        default of every wrapper) and ``input_output_aliases`` (``{input index:
        output index}``, in place).

        Example:
            >>> import jax, jax.numpy as jnp, polykernel as pk
            >>> src = '''void negate(const pk::Tensor& x, pk::Tensor& y) {
            ...   const float* in = x.data_ptr<float>();  // aliased: y's own buffer
            ...   float* out = y.data_ptr<float>();
            ...   for (int64_t i = 0; i < y.numel(); ++i) out[i] = -in[i];
            ... }'''
            >>> mod = pk.load_cpp_inline("doc_variant", src, ["negate"])
            >>> in_place = mod.negate.variant(input_output_aliases={0: 0})
            >>> x = jnp.arange(3.0, dtype=jnp.float32)
            >>> in_place(x, outs=jax.ShapeDtypeStruct((3,), x.dtype)).tolist()
            [-0.0, -1.0, -2.0]
        """
        method = self.vmap_method if vmap_method is _KEEP else vmap_method
        return NativeFunction(
            self.module, self.spec, self.target, self.public_target, method,
            self.handler_address, self._platform, input_output_aliases,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"<NativeFunction {self.where}{self.spec.tokens()} -> {self.target}>"

    # -- the backend's half of the contract -------------------------------------------
    def prepare(self, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec) -> None:
        spec = self.spec
        if len(arrays) != len(spec.args):
            raise KernelCallError(
                f"{self.where}: expected {len(spec.args)} input array(s) "
                f"(spec {spec.tokens()}), got {len(arrays)}."
            )
        if len(outs) != len(spec.rets):
            raise KernelCallError(
                f"{self.where}: expected {len(spec.rets)} output spec(s) in `outs`, "
                f"got {len(outs)}; pass one jax.ShapeDtypeStruct per 'ret'."
            )
        for i, (p, a) in enumerate(zip(self.spec.args, arrays, strict=True)):
            self._check_buffer("input", i, p, a.dtype, a.ndim)
        for i, (p, o) in enumerate(zip(self.spec.rets, outs.structs, strict=True)):
            self._check_buffer("output", i, p, np.dtype(o.dtype), len(o.shape))

    def emit(self, platform, arrays, scalars: Scalars, outs: OutSpec) -> list[Any]:
        import jax

        call = jax.ffi.ffi_call(
            self.target,
            list(outs.structs),
            vmap_method=self.vmap_method,
            input_output_aliases=self.aliases or None,
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
