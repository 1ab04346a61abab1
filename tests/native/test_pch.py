"""The precompiled ``polykernel.h`` (``polykernel.native.pch``): faster, not different.

Each scenario runs in fresh processes on a cache of its own: the first C++ build
of a fresh cache makes no precompiled header, the next makes it beside its compile,
later builds use it (GCC says so with ``-H``), and the library is byte for byte the
one a build without it makes. A damaged or stale copy, a copy GCC cannot read, a
compile error, another compiler and a cache that cannot be written all end in the
plain build.
"""

from __future__ import annotations

import hashlib
import json
import re
import textwrap
from pathlib import Path

import pytest
import zygote

from polykernel.native import pch
from polykernel.native.toolchain import find_host_compiler, is_gcc

pytestmark = pytest.mark.skipif(
    not is_gcc(find_host_compiler()), reason="precompiled headers are GCC's"
)

SRC = """void pch_scale(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] * K;
}"""

# argv: cache dir, then name:K[:flags] per module; prints one JSON line per module.
CHILD = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    from polykernel import CompileOptions, load_cpp_inline
    src = sys.stdin.read()
    for spec in sys.argv[1:]:
        name, k, *flags = spec.split(":")
        options = CompileOptions(extra_cflags=flags) if flags else None
        try:
            mod = load_cpp_inline(name, src.replace("K", k), ["pch_scale"],
                                  verbose=True, options=options)
        except Exception as err:
            print(json.dumps({"error": f"{type(err).__name__}: {err}"}), flush=True)
            continue
        x = jnp.arange(3, dtype=jnp.float32)
        y = mod.pch_scale(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))
        print(json.dumps({"built": mod.built, "lib": mod.library,
                          "value": y.tolist()}), flush=True)
    """
)


def _run(run_env: dict, cache: Path, *specs: str, src: str = SRC,
         env: dict | None = None) -> tuple[list[dict], str]:  # fmt: skip
    """Load each ``name:K[:flag...]`` in one new process; (results, all output)."""
    proc = zygote.run(  # a child of the test process's zygote, as `python -c`
        ["-c", CHILD, *specs], input=src,
        env={**run_env, "POLYKERNEL_CACHE_DIR": str(cache), **(env or {})},
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()
               if line.startswith("{")]  # fmt: skip
    return results, proc.stdout + proc.stderr


def _entries(cache: Path) -> list[Path]:
    section = cache / pch.SECTION
    if not section.is_dir():
        return []
    return [e for e in section.iterdir() if (e / pch.FILE).is_file()]


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_later_builds_use_it_and_make_the_same_library(tmp_path, run_env):
    cache = tmp_path / "cache"
    first, out = _run(run_env, cache, "pch_a:2:-H")
    assert first[0]["built"] and first[0]["value"] == [0.0, 2.0, 4.0]
    assert _entries(cache) == []  # a fresh cache's first build makes none
    _, out = _run(run_env, cache, "pch_a2:5:-H")
    assert "precompiled polykernel.h" not in out  # none yet: made beside this build
    (entry,) = _entries(cache)
    meta = json.loads((entry / "meta.json").read_text())
    assert any(h[0].endswith("/polykernel.h") for h in meta["headers"])

    second, out = _run(run_env, cache, "pch_b:3:-H", "pch_c:4:-H")
    assert [r["value"] for r in second] == [[0.0, 3.0, 6.0], [0.0, 4.0, 8.0]]
    assert out.count("precompiled polykernel.h: ") == 2
    # GCC's -H: "!" marks a precompiled header it used ("x" one it refused).
    lines = out.splitlines()
    used = [x for x in lines if x.endswith(pch.FILE) and not x.startswith("poly")]
    assert len(used) == 2 and all(line.startswith("! ") for line in used), used

    # The same module in a cache without the header: the same bytes.
    plain, out = _run(run_env, tmp_path / "plain", "pch_b:3:-H")
    assert "precompiled polykernel.h" not in out
    assert Path(plain[0]["lib"]).read_bytes() == Path(second[0]["lib"]).read_bytes()


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_a_compile_error_is_reported_once(tmp_path, run_env):
    cache = tmp_path / "cache"
    _run(run_env, cache, "pch_ok:2", "pch_ok2:3")
    bad = SRC.replace("b[i] =", "b[i] = undeclared_thing +")
    (result,), out = _run(run_env, cache, "pch_bad:2", src=bad)
    assert "CompilationError" in result["error"]
    # GCC quotes names with typographic quotes under a UTF-8 locale
    assert re.search(r"['‘]undeclared_thing['’] was not declared", result["error"])
    assert out.count("precompiled polykernel.h") == 1
    assert "compiling again" not in out


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_a_copy_gcc_cannot_read_falls_back_to_the_plain_compile(tmp_path, run_env):
    cache = tmp_path / "cache"
    _run(run_env, cache, "pch_t1:2", "pch_t0:3")
    (entry,) = _entries(cache)
    gch = entry / pch.FILE
    gch.write_bytes(gch.read_bytes()[:200_000])  # GCC: "cannot read PCH file"
    meta = json.loads((entry / "meta.json").read_text())
    data = gch.read_bytes()  # ...with a record that matches: the cache serves it
    meta["files"][pch.FILE] = {"size": len(data),
                               "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    (entry / "meta.json").write_text(json.dumps(meta))
    results, out = _run(run_env, cache, "pch_t2:3", "pch_t3:4")
    assert [r["value"] for r in results] == [[0.0, 3.0, 6.0], [0.0, 4.0, 8.0]]
    assert out.count("cannot read PCH file") == 2, out


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_a_damaged_or_stale_copy_is_replaced(tmp_path, run_env):
    cache = tmp_path / "cache"
    _run(run_env, cache, "pch_d1:2", "pch_d0:3")
    (entry,) = _entries(cache)
    gch = entry / pch.FILE
    gch.write_bytes(gch.read_bytes()[:1000])  # damaged: its checksum fails
    results, out = _run(run_env, cache, "pch_d2:3")
    assert results[0]["value"] == [0.0, 3.0, 6.0]
    assert "damaged cache entry" in out and "precompiled polykernel.h" not in out
    (entry,) = _entries(cache)  # made again
    assert gch.stat().st_size > 1000

    meta_path = entry / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["headers"][0][2] += 1  # a header changed since it was made
    meta_path.write_text(json.dumps(meta))
    results, out = _run(run_env, cache, "pch_d3:4")
    assert results[0]["value"] == [0.0, 4.0, 8.0]
    assert "precompiled polykernel.h" not in out
    (entry,) = _entries(cache)  # retired and made anew, with the true stats
    fresh = json.loads((entry / "meta.json").read_text())
    path, size, mtime = meta["headers"][0]
    assert fresh["headers"][0] == [path, size, mtime - 1]
    _, out = _run(run_env, cache, "pch_d4:5")
    assert "precompiled polykernel.h" in out


def test_no_copy_for_another_compiler(tmp_path, run_env):
    fake = tmp_path / "clang++"  # says it is clang; compiles with g++
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "clang version 99.0.0"; exit 0; fi\n'
        'exec g++ "$@"\n'
    )
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    specs = ("pch_e1:2", "pch_e2:3", "pch_e3:4")
    results, _ = _run(run_env, cache, *specs, env={"CXX": str(fake)})
    assert [r["value"][1] for r in results] == [2.0, 3.0, 4.0]
    assert _entries(cache) == []


def test_no_copy_where_the_cache_cannot_be_written(tmp_path, run_env):
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache root should be")
    results, out = _run(run_env, cache, "pch_f1:2", "pch_f2:3")
    assert [r["value"] for r in results] == [[0.0, 2.0, 4.0], [0.0, 3.0, 6.0]]
    assert out.count("CacheWarning") == 1, out


def test_header_command_keeps_compile_flags_only():
    command = ["g++", "-O3", "-shared", "-I", "inc", "-fPIC", "-static-libstdc++",
               "-static-libgcc", "-Wl,--exclude-libs,ALL", "-Xlinker", "-z",
               "-DX=1", "<src>", "-o", "<out>", "-lm"]  # fmt: skip
    got = pch.header_command(command, Path("s.h"), Path("o.gch"))
    assert got == ["g++", "-O3", "-I", "inc", "-fPIC", "-DX=1", "-c", "-MD", "-MF",
                   "o.gch.d", "-o", "o.gch", "-x", "c++-header", "s.h"]  # fmt: skip
