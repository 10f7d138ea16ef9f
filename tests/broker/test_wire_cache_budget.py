"""The wire cache: one broker-wide budget, the oldest cached batch of any partition evicted first."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.datapath.wire_cache import WireBudget, WireCache
from pylog.config import BrokerConfig


def test_resize_drops_the_oldest_batches_that_no_longer_fit() -> None:
    cache = WireCache(100)
    for i in range(3):
        cache.add(i, i, bytes([i]) * 30)
    cache.resize(61)
    assert cache.first_offset == 1 and cache.get(1, 1000, 3) == [b"\1" * 30, b"\2" * 30]
    cache.resize(0)
    assert len(cache) == 0 and cache.get(2, 1000, 3) is None
    cache.add(3, 3, b"x")  # a zero bound caches nothing
    assert len(cache) == 0


def test_a_busy_partition_uses_what_idle_ones_leave() -> None:
    budget = WireBudget(300)
    busy, idle = WireCache(1000, budget), WireCache(1000, budget)
    idle.add(0, 0, b"i" * 50)
    for i in range(8):
        busy.add(i, i, b"b" * 30)
    assert budget.total == 290 and busy.nbytes == 240 and idle.nbytes == 50
    busy.add(8, 8, b"b" * 30)  # over budget: the oldest batch anywhere (the idle one's) goes
    assert idle.nbytes == 0 and idle.get(0, 100, 1) is None
    assert busy.nbytes == 270 and busy.first_offset == 0 and budget.total == 270
    busy.add(9, 9, b"b" * 40)  # then the busy partition's own oldest
    assert busy.first_offset == 1 and budget.total == 280


def test_clear_truncate_and_close_give_bytes_back(tmp_path: Path) -> None:
    config = BrokerConfig({"pylog.wire.cache.bytes": "1000", "pylog.wire.cache.total.bytes": "3000"})
    replicas = ReplicaManager(config, tmp_path, lambda: 0)
    try:
        parts = [replicas.ensure_partition("a", i, uuid.uuid4(), {}) for i in range(3)]
        budget = replicas.wire_budget
        for p in parts:
            assert p.wire.max_bytes == 1000
            for i in range(5):
                p.wire.add(i, i, b"x" * 100)
        assert budget.total == 1500
        parts[0].wire.truncate_from(3)
        assert budget.total == 1300
        parts[1].wire.clear()
        assert budget.total == 800
        replicas.remove_partition("a", 2)
        assert budget.total == 300
    finally:
        replicas.close()


def test_a_per_partition_bound_still_applies() -> None:
    budget = WireBudget(10_000)
    cache = WireCache(100, budget)
    for i in range(5):
        cache.add(i, i, b"x" * 30)
    assert cache.nbytes == 90 and cache.first_offset == 2 and budget.total == 90


_OPS = st.sampled_from(["add", "gap", "clear", "truncate", "resize"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_OPS, st.integers(0, 3), st.integers(1, 120)), max_size=200))
def test_budget_accounting_matches_the_caches(ops: list[tuple[str, int, int]]) -> None:
    budget = WireBudget(400)
    caches = [WireCache(250, budget) for _ in range(4)]
    next_offset = [0] * 4
    for op, which, size in ops:
        cache = caches[which]
        if op in ("add", "gap"):
            if op == "gap":
                next_offset[which] += 5
            cache.add(next_offset[which], next_offset[which], b"z" * size)
            next_offset[which] += 1
        elif op == "clear":
            cache.clear()
        elif op == "truncate":
            cache.truncate_from(next_offset[which] - 1)
            next_offset[which] = max(0, next_offset[which] - 1)
        else:
            budget.resize(size * 4)
        assert budget.total == sum(c.nbytes for c in caches) <= max(budget.max_bytes, 0)
        for c in caches:
            assert c.nbytes <= c.max_bytes
            assert c.nbytes == sum(len(b) for b in (c.get(c.first_offset, 1 << 30, 1 << 30) or []))


def test_a_get_racing_a_clear_is_a_miss_not_an_error() -> None:
    budget = WireBudget(1 << 20)
    cache = WireCache(1 << 20, budget)
    stop = threading.Event()
    errors: list[BaseException] = []

    def clearer() -> None:
        while not stop.is_set():
            cache.clear()

    t = threading.Thread(target=clearer)
    t.start()
    try:
        for i in range(20_000):
            cache.add(i, i, b"q")
            try:
                got = cache.get(max(0, i - 5), 100, i + 1)
            except BaseException as exc:  # the test is that nothing escapes
                errors.append(exc)
                break
            assert got is None or all(b == b"q" for b in got)
    finally:
        stop.set()
        t.join()
    assert not errors
