"""The one "signature -> target" memo: built once per key, bounded, thread-safe."""

from __future__ import annotations

import threading
import time

from polykernel.contract.memo import BuildMemo


def test_a_key_is_built_once_and_the_oldest_goes_first():
    memo, builds = BuildMemo(limit=2), []

    def build(key):
        builds.append(key)
        return f"target-{key}"

    for key in ["a", "a", "b", "a", "c", "b"]:
        assert memo.get_or_build(key, lambda k=key: build(k)) == f"target-{key}"
    # "a" was used after "b", so "b" (the least recent) was dropped for "c".
    assert builds == ["a", "b", "c", "b"]
    assert len(memo) == 2 and memo.values() == ["target-c", "target-b"]


def test_concurrent_builds_of_one_key_agree_on_one_result():
    memo, results = BuildMemo(), []

    def slow(n):
        time.sleep(0.01)
        return object()

    def worker(n):
        results.append(memo.get_or_build("sig", lambda: slow(n)))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(r) for r in results}) == 1 and len(memo) == 1
