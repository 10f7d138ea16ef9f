"""The wire cache: a broker-wide budget shared equally by the partitions, resized as they come and go."""

from __future__ import annotations

import uuid
from pathlib import Path

from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.wire_cache import WireCache
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


def test_partitions_share_the_broker_budget(tmp_path: Path) -> None:
    config = BrokerConfig({"pylog.wire.cache.bytes": "1000", "pylog.wire.cache.total.bytes": "3000"})
    replicas = ReplicaManager(config, tmp_path, lambda: 0)
    try:
        first = replicas.ensure_partition("a", 0, uuid.uuid4(), {})
        assert first.wire.max_bytes == 1000  # the per-partition bound caps a lone partition
        for i in range(1, 6):
            replicas.ensure_partition("a", i, first.topic_id, {})
        assert {p.wire.max_bytes for p in replicas.snapshot()} == {500}
        for i in range(3, 6):
            replicas.remove_partition("a", i)
        assert {p.wire.max_bytes for p in replicas.snapshot()} == {1000}
    finally:
        replicas.close()
