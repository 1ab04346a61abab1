"""Reading C++ parameter lists: where a function is, what each parameter is.

Text only (regular expressions over comment-free source), no compiler: enough for
the plain ``void f(...)`` signatures the arg_spec describes.
"""

from __future__ import annotations

import re

__all__ = ["ATTR_TYPES", "classify", "find_signature", "scalar_type", "strip_comments"]

# Attribute type -> C++ type. (XLA's typed FFI decodes exactly these scalars.)
ATTR_TYPES: dict[str, str] = {
    "bool": "bool",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float32": "float",
    "float64": "double",
}

# C++ scalar spelling -> attribute type, used when inferring a spec.
_CPP_SCALARS: dict[str, str] = {
    **{cpp: name for name, cpp in ATTR_TYPES.items()},
    **{f"std::{cpp}": name for name, cpp in ATTR_TYPES.items() if cpp.endswith("_t")},
    "int": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "long": "int64",
    "long long": "int64",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "size_t": "uint64",
    "std::size_t": "uint64",
    "short": "int16",
    "char": "int8",
    "signed char": "int8",
    "unsigned char": "uint8",
}


def strip_comments(source: str) -> str:
    """``source`` with its ``/* */`` and ``//`` comments blanked out."""
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)


def find_signature(source: str, fname: str) -> list[str] | None:
    """Parameters (as text) of the first ``void fname(...)`` in ``source``."""
    m = re.search(rf"\bvoid\s+{re.escape(fname)}\s*\(([^)]*)\)", source)
    if m is None:
        return None
    text = " ".join(m.group(1).split())
    if text in ("", "void"):
        return []
    return [p.strip() for p in text.split(",")]


def scalar_type(param: str) -> str | None:
    """The attribute type of a scalar parameter such as ``float alpha``, else None."""
    decl = re.sub(r"=.*$", "", param).strip()
    decl = re.sub(r"\bconst\b", " ", decl)
    decl = " ".join(decl.split())
    m = re.match(r"(.*?)\s*\b([A-Za-z_]\w*)$", decl)
    if m is None:
        return None
    return _CPP_SCALARS.get(m.group(1).strip())


# What a C++ parameter declaration is, before any token is involved.
_TENSOR_KINDS = {
    "const pk::Tensor&": "const-ref",
    "pk::Tensor const&": "const-ref",
    "const pk::Tensor": "const-value",
    "pk::Tensor const": "const-value",
    "pk::Tensor&": "mutable-ref",
    "pk::Tensor": "mutable-value",
}
_STREAM_INTS = ("int64_t", "std::int64_t", "intptr_t", "std::intptr_t")


def classify(param: str, platform: str) -> tuple[str, str | None]:
    """``(kind, name)``: kind is a tensor kind, ``stream``, ``scalar`` or ``other``."""
    decl = " ".join(re.sub(r"=.*$", "", param).split())
    m = re.search(r"([A-Za-z_]\w*)$", decl)
    pname = m.group(1) if m else None
    head = decl[: m.start()].strip() if m else decl
    head = re.sub(r"(::)?\b(pk|BE)::Tensor\b", "pk::Tensor", head)
    head = head.replace(" &", "&").replace("& ", "&")
    if head in _TENSOR_KINDS:
        return _TENSOR_KINDS[head], pname
    if head in ("cudaStream_t", "const cudaStream_t"):
        return "stream", pname
    # The reference passes the stream as `int64_t stream` (CUDA only).
    if platform == "cuda" and pname == "stream" and head in _STREAM_INTS:
        return "stream", pname
    return ("scalar" if scalar_type(param) is not None else "other"), pname
