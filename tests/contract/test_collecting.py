"""Fewer garbage collections while a kernel is emitted (contract/collecting.py):
thresholds raised for the block, restored by the last thread out, a user's own
setting kept, and every backend's build inside it (the one caller of ``emit``)."""

from __future__ import annotations

import gc
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocess_support import last_json, run_python

import polykernel as pk
from polykernel.contract.collecting import BUILD_THRESHOLDS, fewer_collections

DEFAULTS = (700, 10, 10)  # Python's own (the test run sets larger ones)
SPEC = jax.ShapeDtypeStruct((4,), jnp.float32)


@pytest.fixture
def thresholds():
    """Python's default thresholds for the test, the run's restored after it."""
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULTS)
    yield
    gc.set_threshold(*before)


def test_the_block_raises_the_thresholds_and_restores_them(thresholds):
    with fewer_collections():
        assert gc.get_threshold() == BUILD_THRESHOLDS
    assert gc.get_threshold() == DEFAULTS


def test_they_are_restored_when_the_block_raises(thresholds):
    with pytest.raises(ValueError, match="build failed"), fewer_collections():
        raise ValueError("build failed")
    assert gc.get_threshold() == DEFAULTS


def test_larger_thresholds_are_never_lowered_and_the_collector_stays_as_it_was(
    thresholds,
):
    gc.set_threshold(100_000, 5, 500)
    gc.disable()
    try:
        with fewer_collections():
            assert gc.get_threshold() == (100_000, 50, 500)
            assert not gc.isenabled()
        assert gc.get_threshold() == (100_000, 5, 500) and not gc.isenabled()
    finally:
        gc.enable()


def test_a_users_setting_made_during_the_block_is_kept(thresholds):
    with fewer_collections():
        gc.set_threshold(2000, 20, 20)
    assert gc.get_threshold() == (2000, 20, 20)


def test_nested_and_concurrent_blocks_restore_once_the_last_has_ended(thresholds):
    inside, release, seen = threading.Event(), threading.Event(), []

    def build() -> None:
        with fewer_collections():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=build)
    with fewer_collections():
        with fewer_collections():  # re-entered by the same thread
            worker.start()
            assert inside.wait(10)
        seen.append(gc.get_threshold())  # the inner block ended
    seen.append(gc.get_threshold())  # this thread's ended; the worker's has not
    release.set()
    worker.join(10)
    assert seen == [BUILD_THRESHOLDS, BUILD_THRESHOLDS]
    assert gc.get_threshold() == DEFAULTS


class RecordingKernel(pk.BackendKernel):
    """An out-of-tree backend's kernel whose ``emit`` notes the thresholds."""

    backend = "pk_collecting_test"

    def __init__(self, during: list) -> None:
        super().__init__("recording_kernel", "k", SPEC, platforms=("cpu",))
        self.during = during

    def emit(self, platform, arrays, scalars, outs):
        self.during.append(gc.get_threshold())
        return [arrays[0] * 2]


def test_every_backends_emit_runs_inside_the_block(thresholds):
    during: list = []
    kernel = RecordingKernel(during)
    x = jnp.arange(4, dtype=jnp.float32)
    np.testing.assert_array_equal(np.asarray(kernel(x)), np.arange(4) * 2)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(kernel)(x + 1)), np.arange(1, 5) * 2
    )
    assert len(during) == 2 and all(t == BUILD_THRESHOLDS for t in during)
    assert gc.get_threshold() == DEFAULTS


@pytest.mark.slow
def test_a_numba_kernels_compile_runs_inside_the_block(thresholds):
    numba = pytest.importorskip("numba")
    during = []

    def scale(x, out):
        for i in range(out.size):
            out[i] = 3 * x[i]

    real = numba.core.compiler.compile_extra

    def compile_extra(*args, **kwargs):
        during.append(gc.get_threshold())
        return real(*args, **kwargs)

    numba.core.compiler.compile_extra = compile_extra
    try:
        kernel = pk.numba_kernel(
            numba.njit(scale), jax.ShapeDtypeStruct((5,), jnp.float32)
        )
        out = kernel(jnp.arange(5, dtype=jnp.float32))
    finally:
        numba.core.compiler.compile_extra = real
    np.testing.assert_array_equal(np.asarray(out), np.arange(5) * 3)
    assert during and all(t == BUILD_THRESHOLDS for t in during)
    assert gc.get_threshold() == DEFAULTS


FORKS = """
import gc, json, os, threading
from polykernel.contract import collecting
from polykernel.contract.collecting import fewer_collections

gc.set_threshold(700, 10, 10)


def in_child(check):
    # check() runs in a forked child, whose exit status says what it saw
    # (0 as expected, 1 not, -14 it hung: killed by the alarm).
    pid = os.fork()
    if pid == 0:
        import signal
        signal.alarm(5)
        os._exit(0 if check() else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def child_after_another_threads_build():
    def fresh():
        if gc.get_threshold() != (700, 10, 10):
            return False  # the other thread's build is not in the child
        with fewer_collections():
            raised = gc.get_threshold() == collecting.BUILD_THRESHOLDS
        return raised and gc.get_threshold() == (700, 10, 10)

    inside, release = threading.Event(), threading.Event()

    def build():
        with fewer_collections():
            inside.set()
            release.wait(10)

    worker = threading.Thread(target=build)
    worker.start()
    inside.wait(10)
    status = in_child(fresh)
    parent = gc.get_threshold() == collecting.BUILD_THRESHOLDS  # still building
    release.set()
    worker.join(10)
    return status, parent


def child_forked_inside_a_build():
    # The forking thread's own block stays open in the child; its end restores.
    with fewer_collections():
        pid = os.fork()
        if pid == 0:
            ok = gc.get_threshold() == collecting.BUILD_THRESHOLDS
    if pid == 0:
        os._exit(0 if ok and gc.get_threshold() == (700, 10, 10) else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def child_of_a_fork_while_the_lock_was_held():
    def enters():
        with fewer_collections():
            pass
        return gc.get_threshold() == (700, 10, 10)

    with collecting._lock:  # as another thread entering a block would hold it
        return in_child(enters)


another, parent = child_after_another_threads_build()
print(json.dumps({"another": another, "parent": parent,
                  "inside": child_forked_inside_a_build(),
                  "locked": child_of_a_fork_while_the_lock_was_held(),
                  "after": list(gc.get_threshold())}))
"""


def test_a_forked_child_has_only_the_forking_threads_builds(run_env):
    got = last_json(run_python(code=FORKS, env=run_env))
    # 0: as expected in the child; 1: thresholds wrong; -14 (SIGALRM): it hung.
    assert got == {"another": 0, "parent": True, "inside": 0, "locked": 0,
                   "after": [700, 10, 10]}  # fmt: skip
