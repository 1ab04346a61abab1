"""The launcher's build cache: builds filed by content key, read back in any process.

``launcher/cache.py`` keeps what a compiler produced (entry, images, the backend's
fields) under a key the backend computes from what it would compile; a backend
looks the key up before compiling. A missing entry is a silent miss; an entry that
is not a build is a miss with one ``CacheWarning``; the key is the same for the
same parts in any order and differs for anything else.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from subprocess_support import last_json, run_python

from polykernel.errors import CacheWarning
from polykernel.launcher.cache import (
    BUILDS,
    Build,
    build_key,
    cached_build,
    load_build,
    save_build,
)
from polykernel.launcher.kernels import KernelImage

IMAGES = (KernelImage("cubin", "90", b"\x7fELF cubin"),
          KernelImage("ptx", "90", b".version 8.0"))  # fmt: skip


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_the_key_names_the_parts_in_any_order():
    parts = {"kernel": "abc", "arch": "90", "options": [["num_warps", 4]]}
    key = build_key("triton", parts)
    assert len(key) == 64 and key == build_key("triton", dict(reversed(parts.items())))
    assert key != build_key("numba_cuda", parts)
    assert key != build_key("triton", {**parts, "arch": "80"})
    assert key != build_key("triton", {**parts, "extra": None})


def test_a_build_is_read_back_as_it_was_saved(cache):
    key = build_key("test", {"n": 1})
    assert load_build(key) is None  # absent: a silent miss
    build = Build("entry_fn", IMAGES, {"num_warps": 4, "shared": 128})
    assert save_build(key, build)
    assert save_build(key, build)  # already there: kept
    assert load_build(key) == build
    assert (cache / BUILDS).is_dir()


def test_an_entry_that_is_not_a_build_is_a_miss_with_one_warning(cache):
    key = build_key("test", {"n": 2})
    assert save_build(key, Build("entry_fn", IMAGES))
    meta_path = next((cache / BUILDS).glob("*/meta.json"))
    meta = json.loads(meta_path.read_text())
    meta["images"] = [["elf", "90", "cubin-90.img"]]  # an image kind we never write
    meta_path.write_text(json.dumps(meta))
    with pytest.warns(CacheWarning, match="damaged"):
        assert load_build(key) is None


def test_cached_build_compiles_once_and_a_build_it_cannot_read_is_a_miss(cache):
    # The one path every GPU backend takes (Numba-CUDA, Triton, Warp).
    made = []

    def compile():
        made.append(1)
        return ("entry", IMAGES)

    def run(key, from_build=lambda b: (b.entry, b.images)):
        return cached_build(key, compile, lambda r: Build(*r), from_build)

    key = build_key("test", {"kernel": "cached"})
    assert run(key) == run(key) == ("entry", IMAGES) and len(made) == 1
    assert run(key, from_build=lambda b: None) == ("entry", IMAGES)  # not ours
    assert len(made) == 2
    assert run(None) == run(None) and len(made) == 4  # no key: never kept
    assert load_build(key) == Build("entry", IMAGES)


def test_importing_the_launcher_imports_none_of_its_modules(run_env):
    code = textwrap.dedent(
        """
        import json, sys
        import polykernel.launcher as launcher
        before = sorted(m for m in sys.modules if m.startswith("polykernel.launcher."))
        launcher.plan_batch, launcher.KernelImage  # resolved on first use
        after = sorted(m for m in sys.modules if m.startswith("polykernel.launcher."))
        print(json.dumps([before, after]))
        """
    )
    before, after = last_json(run_python(code=code, env=run_env))
    assert before == []
    assert set(after) == {"polykernel.launcher.batching", "polykernel.launcher.images"}


def test_every_public_name_resolves():
    import polykernel.launcher as launcher

    for name in launcher.__all__:
        assert getattr(launcher, name) is not None, name
        assert name in dir(launcher)
    with pytest.raises(AttributeError, match="no_such_name"):
        launcher.no_such_name  # noqa: B018
