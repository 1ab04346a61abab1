"""``numba_kernel``: run a ``@numba.njit`` kernel inside XLA on CPU, GIL-free.

The kernel becomes a typed XLA FFI custom call whose handler is generated as LLVM
IR around a direct call to the compiled kernel (:mod:`.build`): no Python and
no GIL run on the call path. The kernel receives zero-copy NumPy views of the
inputs, then of the outputs (which it fills in place), then the scalar attributes
as keyword arguments::

    @numba.njit
    def axpy(x, y, out, alpha):
        for i in range(out.size):
            out[i] = alpha * x[i] + y[i]

    f = numba_kernel(axpy, jax.ShapeDtypeStruct((n,), jnp.float32))
    f(x, y, alpha=np.float32(2.0))

See ``docs/numba.md`` for dtypes, ``vmap_method`` and caching.
"""

from __future__ import annotations

import logging
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...contract.kernel import BackendKernel
from ...contract.outs import OutSpec
from ...contract.parameters import Parameters
from ...contract.scalars import Scalars, inferred_dtype
from ...errors import (
    KernelCompilationError,
    KernelExecutionError,
    KernelRegistrationError,
    KernelTypeError,
    PolykernelError,
)
from ...ffi import abi
from ...ffi.handler_ir.signature import HALF_MODES, Signature
from ...ffi.naming import target_name
from ...platforms import Platform
from ...types import HalfPrecision, Outs, VmapMethod

__all__ = ["NumbaKernel", "numba_kernel"]

_ATTR_DTYPES = tuple(n for n in abi.DTYPE_CODES if n not in ("float16", "bfloat16"))
_ATTR_DTYPES = tuple(n for n in _ATTR_DTYPES if not n.startswith("complex"))
_TEMPLATE_VERSION = "3"  # bump when the generated handler changes meaning
log = logging.getLogger(__name__)
# Kernels without a content fingerprint get a per-process token instead (never
# written to disk); weak keys, so a new dispatcher never inherits a dead one's.
_local_tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def numba_kernel(
    kernel: Any,
    outs: Outs,
    *,
    vmap_method: VmapMethod | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
    half_precision: HalfPrecision = "float32",
) -> NumbaKernel:
    """Wrap a Numba CPU kernel as a JAX-callable XLA FFI custom call.

    Args:
        kernel: A ``@numba.njit`` function taking ``(*inputs, *outputs)`` (plus any
            scalar attributes by keyword) and writing its outputs in place.
        outs: One ``jax.ShapeDtypeStruct``-like (``.shape``/``.dtype``), giving one
            returned array, or a list/tuple of them, giving a tuple.
        vmap_method: How ``jax.vmap`` calls the kernel: ``"sequential"``,
            ``"sequential_unrolled"`` (one call per batch element),
            ``"expand_dims"``, ``"broadcast_all"`` (one call for the whole batch; the
            handler loops over the batch dims). ``None`` (default) means
            ``"expand_dims"`` (``"broadcast_all"`` when aliases are given).
        input_output_aliases: ``{input index: output index}`` for in-place updates;
            donate the input (``jax.jit(..., donate_argnums=...)``) to avoid a copy.
        half_precision: How float16/bfloat16 buffers reach the kernel:
            ``"float32"`` (default) as float32 arrays, with float32 results rounded
            to nearest even into half-precision outputs; ``"bits"`` as ``uint16``
            arrays holding the raw bits.

    Returns:
        A callable ``f(*arrays, **scalar_attributes)`` usable eagerly, under
        ``jax.jit`` and under ``jax.vmap`` on CPU.

    Raises:
        KernelRegistrationError: ``kernel``, ``outs``, ``vmap_method``,
            ``input_output_aliases`` or ``half_precision`` is invalid.

    Example:
        >>> import jax, jax.numpy as jnp, numba
        >>> from polykernel import numba_kernel
        >>> @numba.njit
        ... def add(x, y, out):
        ...     for i in range(out.size):
        ...         out[i] = x[i] + y[i]
        >>> f = numba_kernel(add, jax.ShapeDtypeStruct((3,), jnp.float32))
        >>> f(jnp.ones(3), jnp.ones(3)).tolist()
        [2.0, 2.0, 2.0]
    """
    return NumbaKernel(kernel, outs, vmap_method, input_output_aliases, half_precision)


def _kernel_name(kernel: Any) -> str:
    py_func = getattr(kernel, "py_func", kernel)
    return getattr(py_func, "__qualname__", repr(py_func))


class NumbaKernel(BackendKernel):
    """The callable :func:`numba_kernel` returns (one per kernel and ``outs``)."""

    backend = "numba"

    def __init__(
        self,
        kernel: Any,
        outs: Any,
        vmap_method: str | None,
        input_output_aliases: Mapping[int, int] | None,
        half_precision: str = "float32",
    ) -> None:
        from .build import check_parallel_layer, import_numba

        numba = import_numba()
        from numba.core.registry import CPUDispatcher

        name = _kernel_name(kernel)
        if not isinstance(kernel, CPUDispatcher):
            raise KernelTypeError(
                f"numba_kernel: expected a @numba.njit function, got "
                f"{type(kernel).__name__} '{name}'. Decorate the kernel with "
                f"@numba.njit (CUDA kernels go to numba_cuda_kernel)."
            )
        if kernel.targetoptions.get("parallel"):
            check_parallel_layer(numba, name)
        super().__init__(
            "numba_kernel",
            name,
            outs,
            platforms=(Platform.CPU,),
            vmap_method=vmap_method,
            input_output_aliases=input_output_aliases,
            # The kernel's arrays fill its leading parameters; the rest are keywords
            # whose dtypes come from their values (infer_dtype).
            parameters=Parameters.of_function(kernel.py_func, leading="buffers"),
            out_dtypes=abi.DTYPE_CODES,  # what crosses the XLA FFI
        )
        if half_precision not in HALF_MODES:
            raise KernelRegistrationError(
                f"numba_kernel '{self.name}': half_precision must be one of "
                f"{HALF_MODES}, got {half_precision!r}."
            )
        self.kernel = kernel
        self.half_precision = half_precision
        self._out_sig = tuple(
            (np.dtype(s.dtype).name, len(s.shape)) for s in self.out_specs
        )
        self._fingerprint: str | None = None
        self._private: dict = {}  # private dispatcher copies (see .compile)
        self._lock = threading.Lock()

    # -- the backend's half of the contract -------------------------------------------
    def infer_dtype(self, value: Any) -> Any:
        """A scalar keyword's dtype is its value's: ``bool``, a Python ``int`` is
        int64, a ``float`` float64, a NumPy scalar keeps its dtype (one the handler
        can pass: no float16/bfloat16/complex)."""
        dtype = inferred_dtype(value)
        return dtype if dtype is not None and dtype.name in _ATTR_DTYPES else None

    def translate_error(self, err: Exception) -> Exception | None:
        import jax

        # By type, not by message: what polykernel raises while tracing is a
        # PolykernelError and JAX's tracing errors are Python's own, so XLA's
        # JaxRuntimeError from an eager call (a one-custom-call program) is the
        # handler failing as it runs: the kernel raised (its type and message are
        # in the error, ffi._pyerror.kernel_exception) or refused a buffer.
        if isinstance(err, jax.errors.JaxRuntimeError):
            return KernelExecutionError(str(err))
        return None

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        import jax

        ins = tuple(
            (self.check_dtype(f"input {i}", a.dtype), a.ndim)
            for i, a in enumerate(arrays)
        )
        sig = Signature(
            ins,
            self._out_sig,
            tuple((n, v.dtype.name) for n, v in scalars),
            half=self.half_precision,
            aliases=tuple(sorted(self.aliases.items())),
        )
        call = jax.ffi.ffi_call(
            self.target_for(sig),
            list(outs.structs),
            vmap_method=self.vmap_method,
            input_output_aliases=self.aliases or None,
        )
        return list(call(*arrays, **dict(scalars)))

    # -- targets ------------------------------------------------------------------

    def _content_key(self) -> tuple[str, bool]:
        """The kernel's content fingerprint and True, or a per-process token and
        False when it has none (the handler is then never written to disk)."""
        with self._lock:
            if self._fingerprint is None:
                from .fingerprint import Unfingerprintable, kernel_fingerprint

                try:
                    self._fingerprint = kernel_fingerprint(self.kernel)
                except Unfingerprintable as why:
                    log.debug("numba_kernel '%s': no content fingerprint: %s",
                              self.name, why)  # fmt: skip
                    token = _local_tokens.setdefault(self.kernel, uuid.uuid4().hex)
                    self._fingerprint = f"local:{token}"
        return self._fingerprint, not self._fingerprint.startswith("local:")

    def target_for(self, sig: Signature) -> str:
        """Name of the registered FFI target for ``sig`` (built on first use)."""
        return self.built(sig, lambda: self._build_target(sig))

    def _build_target(self, sig: Signature) -> str:
        from .build import build_handler

        content, cacheable = self._content_key()
        target = target_name(
            "pk_numba",
            content,
            sig.key(),
            self.name,
            _TEMPLATE_VERSION,
            f"{abi.API_MAJOR}.{abi.API_MINOR}",
        )
        try:
            build_handler(target, sig, self.name, self.kernel, cacheable, self._private)
        except PolykernelError:
            raise
        except Exception as err:
            ins, outs, attrs = sig.spec().split(";")
            raise KernelCompilationError(
                f"numba_kernel '{self.name}': Numba could not compile the kernel for "
                f"inputs ({ins}), outputs ({outs}) and attributes "
                f"({attrs or 'none'}): {type(err).__name__}: {err}"
            ) from err
        return target
