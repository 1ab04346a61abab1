"""A Triton kernel the cache holds, in a fresh process: no compiler (issue 36).

The launcher's build cache is looked up by a content key computed without Triton's
compiler (``backends/triton/fingerprint.py``); these tests check what the key
covers, that a held build is used without ``triton.compile``, and — in two new
processes sharing one cache, lowering for CUDA without a GPU — that the second one
starts no process (no ptxas), calls no compiler, imports no compiler package and
names the same launcher kernel as the first.
"""

from __future__ import annotations

import pytest
from warm_start_support import lower_in_a_new_process

triton = pytest.importorskip("triton")

from triton_kernels import axpy, axpy_kernel  # noqa: E402

from polykernel.backends.triton import compile as triton_compile  # noqa: E402
from polykernel.backends.triton.fingerprint import build_key  # noqa: E402
from polykernel.launcher.cache import Build, load_build, save_build  # noqa: E402
from polykernel.launcher.kernels import KernelImage  # noqa: E402

OPTIONS = {"num_warps": 4, "num_stages": 3, "enable_fp_fusion": True}


@triton.jit
def other(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: triton.language.constexpr):
    offs = triton.language.arange(0, BLOCK)
    triton.language.store(out_ptr + offs, alpha + triton.language.load(x_ptr + offs))


def _sig(block=256, **scalars):
    f = axpy_kernel(1000, block)
    return f.signature(["float32", "float32"], {"n": 1000, "alpha": 2.0, **scalars})


def test_the_key_covers_what_triton_compiles(monkeypatch):
    monkeypatch.delenv("TRITON_DEBUG", raising=False)
    key = build_key(axpy, _sig(), "90", OPTIONS)
    assert key == build_key(axpy, _sig(), "90", dict(reversed(OPTIONS.items())))
    changed = [
        build_key(other, _sig(), "90", OPTIONS),  # another kernel
        build_key(axpy, _sig(block=128), "90", OPTIONS),  # a constexpr
        build_key(axpy, _sig(alpha=2), "90", OPTIONS),  # a scalar's type
        build_key(axpy, _sig(), "80", OPTIONS),  # the architecture
        build_key(axpy, _sig(), "90", {**OPTIONS, "num_warps": 8}),
    ]
    monkeypatch.setenv("TRITON_DEBUG", "1")  # a setting Triton's compiler reads
    changed.append(build_key(axpy, _sig(), "90", OPTIONS))
    assert key not in changed and len(set(changed)) == len(changed)
    # Scalar values are passed at launch, not compiled: one build serves them all.
    monkeypatch.delenv("TRITON_DEBUG")
    assert build_key(axpy, _sig(alpha=3.5), "90", OPTIONS) == key
    monkeypatch.setenv("TRITON_CACHE_DIR", "/elsewhere")  # not what is compiled
    assert build_key(axpy, _sig(), "90", OPTIONS) == key


def test_ir_overrides_keep_no_build(monkeypatch):
    monkeypatch.setenv("TRITON_KERNEL_OVERRIDE", "1")
    assert build_key(axpy, _sig(), "90", OPTIONS) is None


def test_a_held_build_is_used_without_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(triton_compile, "_memo", {})
    sig = _sig()
    images = (KernelImage("cubin", "90", b"\x7fELF fake"),
              KernelImage("ptx", "90", b".version 8.0 fake"))  # fmt: skip
    fields = {"num_warps": 4, "shared": 64, "global_scratch_size": 0,
              "global_scratch_align": 1, "profile_scratch_size": 0}  # fmt: skip
    key = build_key(axpy, sig, "90", OPTIONS)
    assert key is not None and save_build(key, Build("axpy", images, fields))

    def refuse(*args, **kw):
        raise AssertionError("triton.compile was called on a cache hit")

    monkeypatch.setattr(triton, "compile", refuse)
    got = triton_compile.compile_triton(axpy, sig, "90", 4, 3)
    assert got.entry == "axpy" and got.images == images and got.shared == 64
    assert got.ptx == ".version 8.0 fake"
    assert load_build(key) is not None


@pytest.mark.slow  # two processes, one Triton compile and the launcher's build
def test_a_second_process_lowers_from_the_cache_without_compiling(tmp_path, run_env):
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(tmp_path / "cache"),
           "TRITON_CACHE_DIR": str(tmp_path / "triton"),
           "POLYKERNEL_CUDA_ARCH": "90"}  # fmt: skip
    cold = lower_in_a_new_process("triton", env)
    warm = lower_in_a_new_process("triton", env)
    print(f"\ntriton scaled_add, lower() for cuda: cold {cold['lower_ms']:.0f} ms, "
          f"warm {warm['lower_ms']:.1f} ms")  # fmt: skip
    assert cold["compiles"] and cold["launcher"] and len(cold["kernels"]) == 1
    assert warm["compiles"] == [], "the warm process compiled the kernel again"
    assert warm["started"] == [], f"the warm process started {warm['started']}"
    assert warm["imported"] == [], f"the warm process imported {warm['imported']}"
    assert warm["kernels"] == cold["kernels"] and warm["launcher"]
