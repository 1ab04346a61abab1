"""Inputs that used to escape as raw Python errors at scale (issue 20): each now
gets our exception naming the argument, and the process stays usable.

Table ``SCALE``: ``def_batch_partitioning(replicated_inputs=...)``, a binary file
given to ``load_cpp_file``/``load_cuda_dir``, ``build_directory=`` an existing file,
and exported programs this JAX cannot read (a damaged artefact, one naming a newer
StableHLO than this JAX reads), for ``exported_targets`` and ``load_exported``.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from reliability_support import bad, run_case

import polykernel as pk
from polykernel import errors as E

_TMP: list[Path] = []  # the running test's tmp_path: the rows are built at import


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path):
    _TMP.append(tmp_path)
    yield
    _TMP.pop()


OP = pk.XLACustomKernel("reliability.scale")
OK = "void copy(const pk::Tensor& x, pk::Tensor& y) {}"


def _binary() -> Path:
    path = _TMP[-1] / "kernel.cpp"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    return path


def _a_file() -> str:
    path = _TMP[-1] / "not_a_directory"
    path.write_text("x")
    return str(path)


def _artefact(newer: bool) -> jax.export.Exported:
    """An exported program whose StableHLO body is damaged, after the version
    string; ``newer`` also names a StableHLO version above any JAX's."""
    exported = jax.export.export(jax.jit(lambda x: x * 2))(
        jax.ShapeDtypeStruct((3,), jnp.float32)
    )
    blob = exported.mlir_module_serialized
    found = re.search(rb"StableHLO_v(\d+\.\d+\.\d+)", blob)
    assert found, "JAX no longer writes the StableHLO version string"
    if newer:  # the same length: only the digits change
        digits = re.sub(rb"\d", b"9", found.group(1))
        blob = blob[: found.start(1)] + digits + blob[found.end(1) :]
    end = found.end() + 1
    return dataclasses.replace(
        exported, mlir_module_serialized=blob[:end] + bytes(len(blob) - end)
    )


_DAMAGED = r"it names StableHLO \d+\.\d+\.\d+ and this JAX \(.*\) reads StableHLO up "
_DAMAGED += r"to \d+\.\d+\.\d+, so the artefact is damaged.*export it again"
_NEWER = r"serialized as StableHLO 9\.99\.9 by a newer JAX, and this JAX \(.*\) reads "
_NEWER += r"StableHLO up to \d+\.\d+\.\d+.*run it with a JAX that reads StableHLO 9\.99"

SCALE = [
    bad("replicated_inputs-int",
        lambda: OP.def_batch_partitioning(replicated_inputs=5),
        E.KernelTypeError, r"def_batch_partitioning\(\): replicated_inputs must be a "
        r"sequence of input indices, e.g. \(1, 2\) or \(\) \(got int: 5\)"),
    bad("replicated_inputs-none",
        lambda: OP.def_batch_partitioning(replicated_inputs=None),
        TypeError, r"replicated_inputs must be a sequence .* \(got NoneType: None\)"),
    bad("replicated_inputs-str",
        lambda: OP.def_batch_partitioning(replicated_inputs="01"),
        TypeError, r"replicated_inputs must be a sequence .* \(got str: '01'\)"),
    bad("replicated_inputs-bool",
        lambda: OP.def_batch_partitioning(replicated_inputs=(True,)),
        ValueError, r"replicated_inputs must be input indices >= 0"),
    bad("load_cpp_file-binary", lambda: pk.load_cpp_file(_binary(), ["copy"]),
        E.KernelRegistrationError, r"load_cpp_file: filepath '.*kernel.cpp' is not "
        r"UTF-8 text \(byte 0x80 at offset 136\); pass a C\+\+/CUDA source file, "
        r"not a binary"),
    bad("load_cuda_dir-binary",
        lambda: (_binary(), pk.load_cuda_dir(_TMP[-1], file_patterns=["*.cpp"]))[1],
        E.KernelRegistrationError, r"load_cuda_dir: filepath '.*kernel.cpp' is not "
        r"UTF-8 text"),
    bad("build_directory-a-file",
        lambda: pk.load_cpp_inline("scale_bd", OK, ["copy"],
                                   build_directory=_a_file()),
        E.KernelRegistrationError, r"load_cpp_inline: build_directory '.*not_a_"
        r"directory' exists and is not a directory; pass a directory \(it is created "
        r"if missing\) or None"),
    bad("exported_targets-damaged", lambda: pk.exported_targets(_artefact(False)),
        E.KernelRegistrationError, r"polykernel.exported_targets: cannot read the "
        r"exported program \(calling convention \d+\): " + _DAMAGED),
    bad("exported_targets-newer", lambda: pk.exported_targets(_artefact(True)),
        E.KernelRegistrationError, r"exported_targets: .*" + _NEWER),
    bad("load_exported-newer",
        lambda: pk.load_exported(_artefact(True).serialize()),
        ValueError, r"register_exported_targets: .*" + _NEWER),
]  # fmt: skip


@pytest.mark.parametrize("case", SCALE)
def test_scale_bad_inputs(case):
    run_case(case)
