"""Source code of a generated Numba ``@cfunc`` XLA FFI handler.

One handler per (kernel, signature), where the signature is the dtype and rank of
every input and output plus the name and dtype of every scalar attribute. Shapes are
read from the call frame at run time, so new shapes never need a new handler.

The handler is written to a ``.py`` file (see ``_numba_build``) so that Numba's
disk cache can serve it to the next process. Its success path is pure machine
code: no Python, no GIL. Struct offsets come from :mod:`polykernel.ffi.abi`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ffi import abi

__all__ = ["Signature", "handler_source"]

# NumPy dtype a kernel sees for each buffer dtype (Numba has no float16/bfloat16).
KERNEL_DTYPE = {name: f"np.{name}" for name in abi.DTYPE_CODES}
KERNEL_DTYPE.update(bool="np.bool_", float16="np.uint16", bfloat16="np.uint16")
ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
    "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8,
    "float64": 8, "complex64": 8, "complex128": 16,
}  # fmt: skip


@dataclass(frozen=True)
class Signature:
    """What a handler checks: ``(dtype name, rank)`` per buffer, attrs by name."""

    ins: tuple[tuple[str, int], ...]
    outs: tuple[tuple[str, int], ...]
    attrs: tuple[tuple[str, str], ...]  # sorted by name, as XLA passes them

    def spec(self) -> str:
        """Compact text form, used in names and error messages."""
        ins = ",".join(f"{d}[{r}]" for d, r in self.ins)
        outs = ",".join(f"{d}[{r}]" for d, r in self.outs)
        attrs = ",".join(f"{n}:{d}" for n, d in self.attrs)
        return f"{ins};{outs};{attrs}"


def _shape(dims: str, rank: int) -> str:
    items = [f"ld64({dims} + {8 * j})" for j in range(rank)]
    return "(" + "".join(f"{it}, " for it in items) + ")"


def _checks(sig: Signature, label: str) -> list[str]:
    """Lines validating the frame. Mismatches are collected into ``(ek, ea, eb,
    ec)`` and reported from one place: every report site inlines a Python call, and
    one site per buffer made large handlers slow to compile."""
    f = abi
    lines = [
        f"    api = ld64(f + {f.FRAME_API})",
        f"    nin = ld64(f + {f.FRAME_ARGS_SIZE})",
        f"    nout = ld64(f + {f.FRAME_RETS_SIZE})",
        f"    nattr = ld64(f + {f.FRAME_ATTRS_SIZE})",
        f"    if nin != {len(sig.ins)} or nout != {len(sig.outs)} "
        f"or nattr != {len(sig.attrs)}:",
        f"        return handler_error(api, {label}, 0, nin, nout, nattr)",
        f"    args = ld64(f + {f.FRAME_ARGS})",
        f"    rets = ld64(f + {f.FRAME_RETS})",
        "    ek = -1",
        "    ea = 0",
        "    eb = 0",
        "    ec = 0",
    ]

    def fail(kind: int, a: str, b: str, c: str) -> list[str]:
        return [
            "        if ek < 0:",
            f"            ek, ea, eb, ec = {kind}, {a}, {b}, {c}",
        ]

    for role, kind, buffers, base in (
        ("i", 1, sig.ins, "args"),
        ("o", 2, sig.outs, "rets"),
    ):
        for i, (dtype, rank) in enumerate(buffers):
            b = f"{role}b{i}"
            lines += [
                f"    {b} = ld64({base} + {8 * i})",
                f"    {role}k{i} = ld64({b} + {f.BUFFER_RANK}) - {rank}",
                f"    if ld32({b} + {f.BUFFER_DTYPE}) != {f.DTYPE_CODES[dtype]} "
                f"or {role}k{i} < 0:",
                *fail(
                    kind,
                    str(i),
                    f"ld32({b} + {f.BUFFER_DTYPE})",
                    f"ld64({b} + {f.BUFFER_RANK})",
                ),
            ]
    lines.append("    nb = ok0")
    for i in range(1, len(sig.outs)):
        lines += [
            f"    if ok{i} != nb:",
            *fail(
                2,
                str(i),
                f"ld32(ob{i} + {f.BUFFER_DTYPE})",
                f"ld64(ob{i} + {f.BUFFER_RANK})",
            ),
        ]
    lines.append(f"    odims = ld64(ob0 + {f.BUFFER_DIMS})")
    for i in range(len(sig.ins)):
        lines += [
            f"    if ek < 0 and not batch_ok(ld64(ib{i} + {f.BUFFER_DIMS}), ik{i}, "
            f"odims, nb):",
            *fail(4, str(i), f"ik{i}", "nb"),
        ]
    if sig.attrs:
        lines += [
            f"    atypes = ld64(f + {f.FRAME_ATTR_TYPES})",
            f"    avals = ld64(f + {f.FRAME_ATTRS})",
        ]
    for i, (_, dtype) in enumerate(sig.attrs):
        lines += [
            f"    s{i} = ld64(avals + {8 * i})",
            f"    if ld32(atypes + {4 * i}) != {f.ATTR_TYPE_SCALAR} "
            f"or ld32(s{i} + {f.SCALAR_DTYPE}) != {f.DTYPE_CODES[dtype]}:",
            *fail(
                3, str(i), f"ld32(atypes + {4 * i})", f"ld32(s{i} + {f.SCALAR_DTYPE})"
            ),
        ]
    lines += [
        "    if ek >= 0:",
        f"        return handler_error(api, {label}, ek, ea, eb, ec)",
    ]
    for i, (name, dtype) in enumerate(sig.attrs):
        lines.append(
            f"    a_{name} = carray(int2ptr(ld64(s{i} + {f.SCALAR_VALUE})), (1,), "
            f"{KERNEL_DTYPE[dtype]})[0]"
        )
    return lines


def _views(sig: Signature) -> tuple[list[str], list[str]]:
    """Lines building the ``carray`` views for flat batch index ``b``, and the
    names passed to the kernel. Unbatched calls are the case ``nb == 0``, where
    the loop runs once and every offset is zero."""
    lines, names = [], []
    for role, buffers in (("i", sig.ins), ("o", sig.outs)):
        for i, (dtype, rank) in enumerate(buffers):
            b, dims = f"{role}b{i}", f"{role}d{i}"
            if role == "i":
                idx = f"batch_index(b, odims, nb, ld64({b} + {abi.BUFFER_DIMS}), ik{i})"
            else:
                idx = "b"
            offset = f"{ITEMSIZE[dtype]} * {role}n{i} * {idx}"
            ptr = f"ld64({b} + {abi.BUFFER_DATA}) + {offset}"
            lines.append(
                f"{role}v{i} = carray(int2ptr({ptr}), {_shape(dims, rank)}, "
                f"{KERNEL_DTYPE[dtype]})"
            )
            names.append(f"{role}v{i}")
    return lines, names


def handler_source(sig: Signature, label: str) -> str:
    """Python source of a module defining ``handler``, the ``@cfunc`` FFI handler.

    The module expects the user's jitted kernel in its globals as ``__pk_kernel__``
    before it is executed.
    """
    lab = repr(f"{label}|{sig.spec()}")
    attr_params = "".join(f", a_{n}" for n, _ in sig.attrs)
    attr_kw = ", ".join(f"{n}=a_{n}" for n, _ in sig.attrs)
    nbuf = len(sig.ins) + len(sig.outs)
    params = ", ".join(f"x{j}" for j in range(nbuf))
    kernel_args = ", ".join(x for x in (params, attr_kw) if x)
    md = abi
    head = [
        '"""Generated by polykernel.numba_kernel: an XLA FFI handler. Do not edit."""',
        "import numpy as np",
        "from numba import carray, cfunc, njit, types",
        "from polykernel.ffi.intrinsics import guarded_call, handler_error, int2ptr,"
        " ld32, ld64, st32",
        "from polykernel.backends._numba_runtime import batch_index, batch_ok, "
        "prod_dims",
        "",
        'kernel = globals()["__pk_kernel__"]',
        "",
        "",
        "@njit",
        f"def _call({params}{attr_params}):",
        f"    kernel({kernel_args})",
        "",
        "",
        "@cfunc(types.int64(types.int64), cache=True)",
        "def handler(f):",
        f"    ext = ld64(f + {md.FRAME_EXTENSION})",
        f"    if ext != 0 and ld32(ext + {md.EXT_TYPE}) == {md.EXT_TYPE_METADATA}:",
        f"        meta = ld64(ext + {md.METADATA_EXT_METADATA})",
        f"        st32(meta + {md.METADATA_MAJOR}, {md.API_MAJOR})",
        f"        st32(meta + {md.METADATA_MINOR}, {md.API_MINOR})",
        f"        st32(meta + {md.METADATA_TRAITS}, 0)",
        "        return 0",
        f"    if ld32(f + {md.FRAME_STAGE}) != {md.STAGE_EXECUTE}:",
        "        return 0",
    ]
    body = _checks(sig, lab)
    for role, buffers in (("i", sig.ins), ("o", sig.outs)):
        for i, (_, rank) in enumerate(buffers):
            body += [
                f"    {role}d{i} = ld64({role}b{i} + {abi.BUFFER_DIMS}) "
                f"+ 8 * {role}k{i}",
                f"    {role}n{i} = prod_dims({role}d{i}, {rank})",
            ]
    views, names = _views(sig)
    call_args = "(" + "".join(f"{n}, " for n in names)
    call_args += "".join(f"a_{n}, " for n, _ in sig.attrs) + ")"
    body += ["    for b in range(prod_dims(odims, nb)):"]
    body += [f"        {line}" for line in views]
    body += [
        f"        err = guarded_call(api, {lab}, _call, {call_args})",
        "        if err != 0:",
        "            return err",
        "    return 0",
    ]
    return "\n".join(head + body) + "\n"
