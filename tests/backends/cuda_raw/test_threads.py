"""Loaders called from several threads at once (``polykernel cache warm --jobs``).

A build runs outside the loaders' lock, so threads build different modules at the
same time; threads loading one module build it once (the cache's per-key lock) and
get one module object, registered once.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from subprocess_support import last_json

CHILD = textwrap.dedent(
    """
    import json, sys
    from concurrent.futures import ThreadPoolExecutor
    import jax, jax.numpy as jnp
    from polykernel import load_cpp_inline
    src = '''void thr_add(const pk::Tensor& x, pk::Tensor& y) {
      const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
      for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] + K;
    }'''
    def load(k):
        return load_cpp_inline(f"thr_mod{k}", src.replace("K", str(k)), ["thr_add"])
    with ThreadPoolExecutor(6) as pool:
        same = list(pool.map(lambda _: load(1), range(3)))
        other = list(pool.map(load, (2, 3, 4)))
    x = jnp.zeros(2, jnp.float32)
    values = [m.thr_add(x, outs=jax.ShapeDtypeStruct((2,), jnp.float32)).tolist()
              for m in [*same, *other]]
    print(json.dumps({"one_object": all(m is same[0] for m in same),
                      "built": same[0].built, "values": values}))
    """
)


def test_threads_share_one_build_per_module(tmp_path, run_env):
    log = tmp_path / "cxx.log"
    cxx = tmp_path / "logged-g++"
    cxx.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec g++ "$@"\n')
    cxx.chmod(0o755)
    env = {**run_env, "CXX": str(cxx), "POLYKERNEL_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = last_json(proc.stdout)
    assert got["one_object"] and got["built"] is True
    assert got["values"] == [[1.0, 1.0]] * 3 + [[2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]
    compiles = [line for line in log.read_text().splitlines() if "-shared" in line]
    assert len(compiles) == 4  # one per module
