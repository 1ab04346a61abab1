"""``numba_kernel``: run a ``@numba.njit`` kernel inside XLA on CPU, GIL-free.

The kernel becomes a typed XLA FFI custom call whose handler is generated as LLVM
IR around a direct call to the compiled kernel (``_numba_build``): no Python and
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

import functools
import keyword
import logging
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ..call_spec import as_array, kernel_aliases, kernel_outs
from ..errors import (
    KernelCompilationError,
    KernelExecutionError,
    KernelRegistrationError,
    KernelTypeError,
    PolykernelError,
)
from ..ffi import abi
from ..ffi.handler_ir.signature import HALF_MODES, Signature
from ..ffi.naming import kernel_fingerprint, target_name

__all__ = ["NumbaKernel", "numba_kernel"]

_ATTR_DTYPES = tuple(n for n in abi.DTYPE_CODES if n not in ("float16", "bfloat16"))
_ATTR_DTYPES = tuple(n for n in _ATTR_DTYPES if not n.startswith("complex"))
_TEMPLATE_VERSION = "2"  # bump when the generated handler changes meaning
_MARKER = "polykernel numba_kernel '"
_EAGER_CACHE_SIZE = 64
log = logging.getLogger(__name__)
# Kernels without a content fingerprint get a per-process token instead (never
# written to disk); weak keys, so a new dispatcher never inherits a dead one's.
_local_tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def numba_kernel(
    kernel: Any,
    outs: Any,
    *,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
    half_precision: str = "float32",
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


def _check_dtype(name: str, what: str, dtype: Any) -> str:
    try:
        abi.dtype_code(dtype)
    except TypeError:
        raise KernelRegistrationError(
            f"numba_kernel '{name}': {what} has dtype {np.dtype(dtype).name}, which "
            f"cannot cross the XLA FFI; use one of {', '.join(abi.DTYPE_CODES)}."
        ) from None
    return np.dtype(dtype).name


class NumbaKernel:
    """The callable :func:`numba_kernel` returns (one per kernel and ``outs``)."""

    def __init__(
        self,
        kernel: Any,
        outs: Any,
        vmap_method: str | None,
        input_output_aliases: dict[int, int] | None,
        half_precision: str = "float32",
    ) -> None:
        from ._numba_build import check_parallel_layer, import_numba

        numba = import_numba()
        from numba.core.registry import CPUDispatcher

        self.name = _kernel_name(kernel)
        if not isinstance(kernel, CPUDispatcher):
            raise KernelTypeError(
                f"numba_kernel: expected a @numba.njit function, got "
                f"{type(kernel).__name__} '{self.name}'. Decorate the kernel with "
                f"@numba.njit (CUDA kernels go to numba_cuda_kernel)."
            )
        if kernel.targetoptions.get("parallel"):
            check_parallel_layer(numba, self.name)
        self.kernel = kernel
        self.out_specs, self._single = kernel_outs(
            f"numba_kernel '{self.name}'",
            outs,
            lambda what, dt: _check_dtype(self.name, what, dt),
        )
        self.aliases = kernel_aliases(
            f"numba_kernel '{self.name}'",
            vmap_method,
            input_output_aliases,
            len(self.out_specs),
        )
        if half_precision not in HALF_MODES:
            raise KernelRegistrationError(
                f"numba_kernel '{self.name}': half_precision must be one of "
                f"{HALF_MODES}, got {half_precision!r}."
            )
        self.half_precision = half_precision
        default = "broadcast_all" if self.aliases else "expand_dims"
        self.vmap_method = vmap_method or default
        self._out_sig = tuple(
            (np.dtype(s.dtype).name, len(s.shape)) for s in self.out_specs
        )
        self._fingerprint: str | None = None
        self._private: dict = {}  # private dispatcher copies (see _numba_compile)
        self._targets: dict[Signature, str] = {}
        self._eager: dict[Any, Callable[..., Any]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"numba_kernel({self.name}, outs={list(self.out_specs)})"

    # -- calling -----------------------------------------------------------------

    def __call__(self, *args: Any, **attrs: Any) -> Any:
        """Run the kernel on ``args``; keyword arguments are scalar attributes."""
        import jax

        if any(isinstance(a, jax.core.Tracer) for a in args):
            return self.bind(*args, **attrs)
        where = f"numba_kernel '{self.name}'"
        args = tuple(as_array(where, i, a) for i, a in enumerate(args))
        attr_vals = self._attributes(attrs)
        key = (
            tuple((a.shape, a.dtype) for a in args),
            tuple((n, v.dtype.str, v.item()) for n, v in attr_vals),
        )
        fn = self._eager.get(key)
        if fn is None:
            fn = jax.jit(functools.partial(self._bind, attr_vals=attr_vals))
            with self._lock:
                if len(self._eager) >= _EAGER_CACHE_SIZE:
                    self._eager.pop(next(iter(self._eager)))
                self._eager[key] = fn
        try:
            return fn(*args)
        except (jax.errors.JaxRuntimeError, ValueError) as err:
            # jit's C++ fast path reports a failed custom call as ValueError, the
            # slow path as JaxRuntimeError; both carry the handler's message.
            if _MARKER in str(err) and not isinstance(err, KernelRegistrationError):
                raise KernelExecutionError(str(err)) from err
            raise

    def bind(self, *args: Any, **attrs: Any) -> Any:
        """Emit the FFI custom call (the traced path used under ``jax.jit``)."""
        return self._bind(*args, attr_vals=self._attributes(attrs))

    def _bind(self, *args: Any, attr_vals: tuple[tuple[str, Any], ...]) -> Any:
        import jax

        for i in self.aliases:
            if not (isinstance(i, int) and 0 <= i < len(args)):
                raise KernelRegistrationError(
                    f"numba_kernel '{self.name}': input_output_aliases names input "
                    f"{i!r}, but the call has {len(args)} inputs."
                )
        ins = []
        for i, a in enumerate(args):
            a = a if hasattr(a, "ndim") else jax.numpy.asarray(a)
            ins.append((_check_dtype(self.name, f"input {i}", a.dtype), a.ndim))
        sig = Signature(
            tuple(ins),
            self._out_sig,
            tuple((n, v.dtype.name) for n, v in attr_vals),
            half=self.half_precision,
            aliases=tuple(sorted(self.aliases.items())),
        )
        call = jax.ffi.ffi_call(
            self.target_for(sig),
            list(self.out_specs),
            vmap_method=self.vmap_method,
            input_output_aliases=self.aliases or None,
        )
        out = call(*args, **dict(attr_vals))
        return out[0] if self._single else tuple(out)

    def _attributes(self, attrs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        import jax

        result = []
        for name in sorted(attrs):  # XLA passes attributes sorted by name
            value = attrs[name]
            if not name.isidentifier() or keyword.iskeyword(name):
                raise KernelRegistrationError(
                    f"numba_kernel '{self.name}': attribute name {name!r} is not a "
                    f"valid Python identifier."
                )
            if isinstance(value, jax.core.Tracer):
                raise KernelRegistrationError(
                    f"numba_kernel '{self.name}': attribute '{name}' is a traced "
                    f"value; attributes are compile-time scalars. Pass it as an "
                    f"array input instead, or make it static (static_argnames)."
                )
            arr = np.asarray(value)
            if arr.ndim != 0 or arr.dtype.name not in _ATTR_DTYPES:
                raise KernelRegistrationError(
                    f"numba_kernel '{self.name}': attribute '{name}' must be a "
                    f"scalar of dtype {', '.join(_ATTR_DTYPES)}; got "
                    f"{type(value).__name__} with dtype {arr.dtype.name} and shape "
                    f"{arr.shape}. Pass arrays as inputs."
                )
            result.append((name, arr[()]))
        return tuple(result)

    # -- targets ------------------------------------------------------------------

    def _content_key(self) -> tuple[str, bool]:
        """The kernel's content fingerprint and True, or a per-process token and
        False when it has none (the handler is then never written to disk)."""
        with self._lock:
            if self._fingerprint is None:
                from ..ffi.fingerprint import Unfingerprintable

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
        target = self._targets.get(sig)
        if target is not None:
            return target
        from ._numba_build import build_handler

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
        self._targets[sig] = target
        return target
