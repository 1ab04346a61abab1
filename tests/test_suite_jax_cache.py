"""The run's one JAX compilation cache (tests/conftest.py): every process of a test
run, the pytest-xdist workers and their child processes, keeps and finds compiled
programs in one folder of the run, so a program compiled again with the same HLO
loads its executable."""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import pytest
from run_folders import assert_shared_by_the_run
from subprocess_support import last_json, run_python

pytestmark = pytest.mark.skipif(
    os.environ.get("POLYKERNEL_TEST_GPU") == "1", reason="CPU runs only"
)

# A program no other test compiles: its constant is this file's own.
PROGRAM = "lambda x: jnp.sin(x) * 0.318309886 + 2.718281828"
CHILD = f"""
import json, jax, jax.numpy as jnp
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name))
jax.jit({PROGRAM})(jnp.arange(7.0)).block_until_ready()
print(json.dumps(events))
"""


def test_the_run_shares_one_cache_that_keeps_every_program():
    path = os.environ["JAX_COMPILATION_CACHE_DIR"]
    assert path == os.environ["POLYKERNEL_TEST_JAX_CACHE"]
    assert_shared_by_the_run(path, "jax-cache")
    assert jax.config.jax_compilation_cache_dir == path
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
    assert jax.config.jax_persistent_cache_min_entry_size_bytes == 0


def test_a_program_compiled_here_is_loaded_by_a_child_process():
    events: list[str] = []
    record = True

    def listen(name: str, **_: object) -> None:
        if record:
            events.append(name)

    jax.monitoring.register_event_listener(listen)
    try:
        fn = eval(PROGRAM, {"jnp": jnp})
        jax.jit(fn)(jnp.arange(7.0)).block_until_ready()
    finally:
        record = False
    # Compiled here first or found (another process of the run got there first).
    assert {"/jax/compilation_cache/cache_misses",
            "/jax/compilation_cache/cache_hits"} & set(events), events  # fmt: skip
    child = last_json(run_python("-c", CHILD, env=dict(os.environ)))
    assert "/jax/compilation_cache/cache_hits" in child, child
    assert "/jax/compilation_cache/cache_misses" not in child, child


RACE = "Error reading persistent compilation cache entry for 'jit_f': ValueError: x"


def test_an_entry_read_while_written_is_a_miss_not_a_failure():
    # JAX writes an entry in place; a reader in that moment warns and compiles. The
    # run ignores that warning: here (pyproject.toml) and in every child process.
    import warnings

    warnings.warn(RACE, UserWarning, stacklevel=1)  # "error" would raise here
    assert (
        "ignore:Error reading persistent compilation cache entry:UserWarning"
        in (os.environ["PYTHONWARNINGS"])
    )
    code = f"import warnings; warnings.warn({RACE!r}, UserWarning); print('{{}}')"
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ),
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stderr == "" and done.stdout.strip() == "{}"
