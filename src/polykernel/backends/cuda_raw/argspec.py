"""The arg_spec: which C++ parameter is an input, an output, the stream or an attribute.

A function's spec is a list of tokens, one per C++ parameter, in parameter order:

=====================  ======================================================
token                  C++ parameter
=====================  ======================================================
``arg``                ``const pk::Tensor&`` (an input buffer)
``ret``                ``pk::Tensor&`` (an output buffer)
``stream``             ``cudaStream_t`` (CUDA only)
``attr.<name>:<type>`` a plain scalar, passed as the keyword ``<name>=``
=====================  ======================================================

The reference's spelling is accepted too: ``const BE::Tensor x`` (by value) is an
input, ``BE::Tensor out`` an output, and ``int64_t stream`` the CUDA stream.
A buffer token must agree with the parameter's constness: ``ret`` for a ``const``
tensor (the kernel could not write its output) or ``arg`` for a ``pk::Tensor&``
(an input bound to a writable reference) is rejected before compiling.

A buffer token may pin the dtype and the rank the function expects:
``"arg:float32"``, ``"ret:int32[2]"`` (rank 2) or ``"arg[0]"`` (any dtype, rank 0).
The generated wrapper then rejects other buffers before the function runs. Without a
pin, ``pk::Tensor::data_ptr<T>()`` still rejects a buffer whose dtype is not ``T``.

When ``functions`` lists only names, the tokens are inferred from the ``void f(...)``
signature found in the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ...errors import KernelRegistrationError, KernelTypeError
from ...ffi.abi import DTYPE_CODES
from .annotations import discover, macro_parameters
from .signature import ATTR_TYPES, classify, find_signature, scalar_type, strip_comments
from .tokens import normalize_tokens

__all__ = [
    "ATTR_TYPES",
    "BUFFER_DTYPES",
    "FunctionSpec",
    "Param",
    "check_module_name",
    "resolve_specs",
]

# Buffer dtype -> XLA_FFI_DataType code: the one table lives with the FFI ABI.
BUFFER_DTYPES: dict[str, int] = dict(DTYPE_CODES)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_BUFFER_TOKEN = re.compile(r"(arg|ret)(?::([a-z0-9]+))?(?:\[(\d+)\])?\Z")
_ATTR_TOKEN = re.compile(r"attr\.([^:]*)(?::(.*))?\Z")
# Names the Python callable uses for itself; an attribute may not shadow them.
_RESERVED_ATTRS = {"outs"}
_TOKEN_HELP = (
    "valid tokens: 'arg', 'ret' (optionally 'arg:float32', 'ret:int32[2]'), "
    "'stream', 'attr.<name>:<type>' with <type> one of " + ", ".join(ATTR_TYPES)
)


@dataclass(frozen=True)
class Param:
    """One C++ parameter of a native function.

    Attributes:
        kind: ``"arg"``, ``"ret"``, ``"stream"`` or ``"attr"``.
        name: attribute name (``attr``) or the C++ parameter name when known.
        dtype: pinned buffer dtype or attribute type; ``None`` when not pinned.
        rank: pinned buffer rank; ``None`` when not pinned.
    """

    kind: str
    name: str | None = None
    dtype: str | None = None
    rank: int | None = None

    def token(self) -> str:
        """The canonical token text (what ``repr`` and the cache key use)."""
        if self.kind == "attr":
            return f"attr.{self.name}:{self.dtype}"
        if self.kind == "stream":
            return "stream"
        text = self.kind + (f":{self.dtype}" if self.dtype else "")
        return text + (f"[{self.rank}]" if self.rank is not None else "")


@dataclass(frozen=True)
class FunctionSpec:
    """The resolved spec of one function: its name and its parameters in order."""

    name: str
    params: tuple[Param, ...]

    @property
    def args(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "arg")

    @property
    def rets(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "ret")

    @property
    def attrs(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "attr")

    def attr_types(self) -> dict[str, str]:
        """``{name: type}`` of the attributes, in order (a checked spec's
        attributes all have both)."""
        types = {}
        for p in self.attrs:
            assert p.name is not None and p.dtype is not None  # see _check_spec
            types[p.name] = p.dtype
        return types

    @property
    def has_stream(self) -> bool:
        return any(p.kind == "stream" for p in self.params)

    def tokens(self) -> list[str]:
        return [p.token() for p in self.params]


def check_module_name(name: object) -> str:
    """Check a module name: dotted C identifiers (it becomes part of target names)."""
    if not isinstance(name, str) or not _MODULE_NAME.match(name):
        raise (KernelRegistrationError if isinstance(name, str) else KernelTypeError)(
            f"polykernel.native: module name {name!r} is not valid; expected C "
            "identifiers joined by dots, e.g. 'my_kernels' or 'mylib.ops'."
        )
    return name


def resolve_specs(
    module: str,
    source: str,
    functions: Mapping[str, Sequence[str]] | Iterable[str] | str | None,
    platform: str,
) -> tuple[FunctionSpec, ...]:
    """Turn the user's ``functions`` argument into checked specs.

    Args:
        module: module name, for messages.
        source: the user's C++/CUDA source (searched for ``void f(...)`` signatures).
        functions: ``{"f": ["arg", "ret", ...]}``, names whose spec is inferred, or
            ``None``: the functions marked ``// @pk f`` / ``// @BE f`` in the source.
        platform: ``"cpu"`` or ``"cuda"``; ``stream`` is only valid for ``"cuda"``.

    Raises:
        KernelRegistrationError: unknown token, bad name, missing function, or a spec
            that disagrees with the C++ signature.

    Example:
        >>> from polykernel.backends.cuda_raw.argspec import resolve_specs
        >>> src = "void f(const pk::Tensor& x, pk::Tensor& y, float a) {}"
        >>> resolve_specs("m", src, ["f"], "cpu")[0].tokens()
        ['arg', 'ret', 'attr.a:float32']
    """
    if functions is None:
        functions = discover(module, source)
    if isinstance(functions, str):
        functions = [functions]
    if not isinstance(functions, Mapping | Iterable):
        raise KernelTypeError(
            f"polykernel.native module '{module}': `functions` must be a dict "
            "{'name': [tokens]}, a list of names or None (got "
            f"{type(functions).__name__}); e.g. functions=['vector_add']."
        )
    items = (
        list(functions.items())
        if isinstance(functions, Mapping)
        else [(f, None) for f in functions]
    )
    if not items:
        raise KernelRegistrationError(
            f"polykernel.native module '{module}': `functions` is empty; list the C++ "
            "functions to export, e.g. functions=['vector_add']."
        )
    clean = strip_comments(source)
    specs = []
    for fname, tokens in items:
        where = f"polykernel.native module '{module}', function {fname!r}"
        if not isinstance(fname, str) or not _IDENT.match(fname):
            raise KernelRegistrationError(
                f"{where}: the name is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)."
            )
        signature = find_signature(clean, fname)
        if signature is None:
            signature = macro_parameters(source, fname)
        if tokens is None:
            if signature is None:
                raise KernelRegistrationError(
                    f"{where}: no 'void {fname}(...)' definition found in the source, "
                    "so its spec cannot be inferred. Define it, or pass an explicit "
                    f"spec: functions={{'{fname}': ['arg', 'ret', ...]}}."
                )
            params = tuple(_infer_param(where, p, platform) for p in signature)
        else:
            if isinstance(tokens, str):
                tokens = [tokens]
            if not isinstance(tokens, Iterable):
                raise KernelTypeError(
                    f"{where}: the spec must be a list of tokens such as ['arg', "
                    f"'ret'] (got {type(tokens).__name__})."
                )
            params = _parse_tokens(where, normalize_tokens(tokens), signature)
            if signature is not None:
                for i, (param, decl) in enumerate(zip(params, signature, strict=True)):
                    _check_agrees(where, i, param, decl, platform)
        spec = FunctionSpec(fname, params)
        _check_spec(where, spec, platform)
        specs.append(spec)
    return tuple(specs)


def _parse_tokens(
    where: str, tokens: list[object], signature: list[str] | None
) -> tuple[Param, ...]:
    if signature is not None and len(signature) != len(tokens):
        raise KernelRegistrationError(
            f"{where}: the spec has {len(tokens)} tokens {tokens} but the C++ "
            f"signature has {len(signature)} parameters {signature}; give one token "
            "per parameter, in order."
        )
    params = []
    for i, tok in enumerate(tokens):
        if not isinstance(tok, str):
            raise KernelTypeError(f"{where}: token {tok!r} is not a string.")
        tok = tok.strip()
        if tok == "stream":
            params.append(Param("stream"))
            continue
        m = _BUFFER_TOKEN.match(tok)
        if m:
            kind, dtype, rank = m.groups()
            if dtype is not None and dtype not in BUFFER_DTYPES:
                raise KernelRegistrationError(
                    f"{where}: token {tok!r} pins unknown dtype {dtype!r}; expected "
                    f"one of {', '.join(BUFFER_DTYPES)}."
                )
            params.append(Param(kind, None, dtype, None if rank is None else int(rank)))
            continue
        m = _ATTR_TOKEN.match(tok)
        if not m:
            raise KernelRegistrationError(
                f"{where}: unknown token {tok!r}; {_TOKEN_HELP}."
            )
        name, atype = m.groups()
        if atype is None and signature is not None:
            atype = scalar_type(signature[i])
        if atype is None:
            raise KernelRegistrationError(
                f"{where}: token {tok!r} has no type and none can be read from the "
                f"C++ signature; write e.g. '{tok}:float32'. {_TOKEN_HELP}."
            )
        params.append(Param("attr", name, atype))
    return tuple(params)


def _check_spec(where: str, spec: FunctionSpec, platform: str) -> None:
    seen: set[str] = set()
    for p in spec.attrs:
        if not p.name or not _IDENT.match(p.name):
            raise KernelRegistrationError(
                f"{where}: attribute name {p.name!r} is not a C identifier."
            )
        if p.name in _RESERVED_ATTRS or p.name in seen:
            raise KernelRegistrationError(
                f"{where}: attribute name {p.name!r} is reserved or repeated; "
                "rename the C++ parameter."
            )
        if p.dtype not in ATTR_TYPES:
            raise KernelRegistrationError(
                f"{where}: attribute '{p.name}' has unsupported type {p.dtype!r}; "
                f"expected one of {', '.join(ATTR_TYPES)}."
            )
        seen.add(p.name)
    n_stream = sum(p.kind == "stream" for p in spec.params)
    if n_stream and platform != "cuda":
        raise KernelRegistrationError(
            f"{where}: a 'stream' parameter is only valid for CUDA functions "
            "(load_cuda_inline / load_cuda_file); remove it for C++ CPU code."
        )
    if n_stream > 1:
        raise KernelRegistrationError(f"{where}: more than one 'stream' token.")
    if not spec.rets:
        raise KernelRegistrationError(
            f"{where}: the function has no output ('ret' / non-const pk::Tensor&); "
            "XLA needs at least one result buffer."
        )


def _infer_param(where: str, param: str, platform: str) -> Param:
    kind, pname = classify(param, platform)
    if kind.startswith("const-"):
        return Param("arg", pname)
    if kind.startswith("mutable-"):
        return Param("ret", pname)
    if kind == "stream":
        return Param("stream", pname)
    if kind == "scalar":
        return Param("attr", pname, scalar_type(param))
    raise KernelRegistrationError(
        f"{where}: cannot infer a token for parameter {param!r}; expected "
        "'const pk::Tensor& x' (input), 'pk::Tensor& y' (output), "
        "'cudaStream_t s' (stream) or a scalar such as 'float alpha' (attribute) "
        "(or the reference's 'const BE::Tensor x', 'BE::Tensor out', "
        "'int64_t stream'), or pass an explicit spec."
    )


def _check_agrees(where: str, i: int, p: Param, decl: str, platform: str) -> None:
    """Reject a token that contradicts its C++ parameter (before nvcc/g++ would)."""
    kind, pname = classify(decl, platform)
    tensor = kind.endswith("-ref") or kind.endswith("-value")
    expected = None
    if p.kind == "ret" and kind.startswith("const-"):
        expected = "'arg' (a const tensor is an input), or drop the 'const' if the "
        expected += "function writes it"
    elif p.kind == "arg" and kind == "mutable-ref":
        expected = "'ret' (a non-const pk::Tensor& is an output), or declare it "
        expected += "'const pk::Tensor&' if the function only reads it"
    elif p.kind in ("arg", "ret") and kind in ("stream", "scalar"):
        expected = "'stream'" if kind == "stream" else f"'attr.{pname}'"
        expected += " (the parameter is not a tensor)"
    elif p.kind in ("attr", "stream") and tensor:
        expected = "'arg' or 'ret' (the parameter is a tensor)"
    if expected is not None:
        raise KernelRegistrationError(
            f"{where}: parameter {i} '{pname}' is declared {decl!r} but its token is "
            f"{p.token()!r}; expected {expected}."
        )
