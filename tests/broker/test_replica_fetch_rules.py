"""The fetch path's replication throttle (KIP-73) and fetch from follower (KIP-392) on real
partition logs and a manual clock, no sockets: a throttled follower out of the ISR gets no records
once the leader's rate is over its bound, an in-sync one always does; the bound follows the
dynamic broker config; a leader names a preferred read replica in the consumer's rack; a follower
serves Fetch v11+ consumers up to its high watermark while in the ISR, and refuses older ones."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.protocol.errors import ErrorCode
from records_util import make_batch

from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_manager import (
    CONSUMER,
    FetchIsolation,
    FetchParams,
    FetchPartitionData,
    FetchPosition,
    ReplicaManager,
)
from pylog.clock import ManualClock
from pylog.config import BrokerConfig
from pylog.replication.replica_selector import RACK_AWARE

EPOCH = 3


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _manager(tmp_path: Path, clock: ManualClock, **configs: str) -> ReplicaManager:
    config = BrokerConfig({"node.id": "1", "broker.rack": "r1", **configs})
    return ReplicaManager(config, tmp_path, clock.wall_ms, clock.monotonic_ms)


@pytest.fixture
def throttled(tmp_path: Path, clock: ManualClock) -> Iterator[ReplicaManager]:
    manager = _manager(tmp_path, clock, **{"leader.replication.throttled.rate": "1000"})
    yield manager
    manager.close()


def _lead(replicas: ReplicaManager, configs: dict[str, str], isr: tuple[int, ...] = (1, 2)) -> Partition:
    part = replicas.ensure_partition("t", 0, uuid.uuid4(), configs)
    part.become_leader(1, EPOCH, 0, (1, 2, 3), isr, now_ms=0)
    return part


def _fetch(
    replicas: ReplicaManager, replica_id: int, offset: int, client_rack: str | None = None
) -> FetchPartitionData:
    isolation = FetchIsolation.LOG_END if replica_id >= 0 else FetchIsolation.HIGH_WATERMARK
    params = FetchParams(replica_id, 0, 1, 1 << 20, isolation, client_rack)
    wanted = [("t", FetchPosition(0, offset, 1 << 20))]
    out = replicas.fetch_messages(params, wanted, expand_isr=lambda _p, _r: None, stopping=lambda: False)
    assert isinstance(out, list)
    return out[0]


def test_a_throttled_follower_out_of_the_isr_waits_while_the_rate_is_over(
    throttled: ReplicaManager, clock: ManualClock
) -> None:
    part = _lead(throttled, {"leader.replication.throttled.replicas": "0:1"})
    throttled.append_records([("t", 0, make_batch([b"x" * 3000]))], acks=1, timeout_ms=0)
    first = _fetch(throttled, 3, 0)
    assert first.records and first.error == 0  # nothing measured yet
    held = _fetch(throttled, 3, 0)
    assert held.error == 0 and not held.records and held.high_watermark == part.high_watermark
    in_sync = _fetch(throttled, 2, 0)
    assert in_sync.records, "an in-sync follower is never throttled"
    clock.advance(60_000)  # the windows expire
    assert _fetch(throttled, 3, 0).records


def test_only_listed_replicas_are_throttled(throttled: ReplicaManager) -> None:
    _lead(throttled, {"leader.replication.throttled.replicas": "0:2"})  # names broker 2, not this one
    throttled.append_records([("t", 0, make_batch([b"x" * 3000]))], acks=1, timeout_ms=0)
    assert all(_fetch(throttled, 3, 0).records for _ in range(3))


def test_the_rate_follows_the_dynamic_broker_config(throttled: ReplicaManager) -> None:
    assert throttled.leader_quota.bound == 1000
    throttled.config.set_dynamic({"leader.replication.throttled.rate": "500"}, {})
    throttled.throttle_rates_changed()
    assert throttled.leader_quota.bound == 500  # the cluster-wide default
    throttled.config.set_dynamic(
        {"leader.replication.throttled.rate": "500"}, {"follower.replication.throttled.rate": "700"}
    )
    throttled.throttle_rates_changed()
    assert throttled.follower_quota.bound == 700  # this broker's own
    throttled.update_configs("t", {"follower.replication.throttled.replicas": "*"})
    assert throttled.follower_quota.is_throttled("t", 5)


def test_the_leader_names_a_replica_in_the_consumers_rack(tmp_path: Path, clock: ManualClock) -> None:
    replicas = _manager(tmp_path, clock, **{"replica.selector.class": RACK_AWARE})
    try:
        part = _lead(replicas, {}, isr=(1, 2, 3))
        replicas.set_live_brokers({1: "r1", 2: "r2", 3: "r3"})
        replicas.append_records([("t", 0, make_batch([b"a", b"b"]))], acks=1, timeout_ms=0)
        for follower in (2, 3):
            _fetch(replicas, follower, part.log_end_offset)
        to_r2 = _fetch(replicas, CONSUMER, 0, client_rack="r2")
        assert to_r2.preferred_read_replica == 2 and not to_r2.records and to_r2.error == 0
        assert _fetch(replicas, CONSUMER, 0, client_rack="r1").preferred_read_replica == -1
        assert _fetch(replicas, CONSUMER, 0, client_rack="").records
        assert _fetch(replicas, CONSUMER, 0).preferred_read_replica == -1  # before v11: no rack
        replicas.set_live_brokers({1: "r1", 3: "r3"})  # broker 2 fenced
        assert _fetch(replicas, CONSUMER, 0, client_rack="r2").preferred_read_replica == -1
    finally:
        replicas.close()


def test_a_follower_serves_v11_consumers_to_its_high_watermark(tmp_path: Path, clock: ManualClock) -> None:
    replicas = _manager(tmp_path, clock)
    try:
        part = replicas.ensure_partition("t", 0, uuid.uuid4(), {})
        part.become_follower(1, 2, EPOCH, 0, (2, 1), (2, 1))
        part.append_as_follower(make_batch([b"a", b"b"]), clock.wall_ms())
        second = struct.pack(">q", 2) + make_batch([b"c"])[8:]  # base offset 2 (outside the CRC)
        part.append_as_follower(second, clock.wall_ms())
        part.follower_high_watermark(2)  # the leader has committed the first batch only
        served = _fetch(replicas, CONSUMER, 0, client_rack="")
        assert served.error == 0 and served.high_watermark == 2 and len(served.records) == 1
        assert _fetch(replicas, CONSUMER, 2, client_rack="").records == ()  # past its high watermark
        assert _fetch(replicas, CONSUMER, 5, client_rack="").error == ErrorCode.OFFSET_OUT_OF_RANGE
        assert _fetch(replicas, CONSUMER, 0).error == ErrorCode.NOT_LEADER_OR_FOLLOWER  # before v11
        part.become_follower(1, 2, EPOCH, 1, (2, 1), (2,))  # the ISR no longer holds this replica
        out_of_sync = _fetch(replicas, CONSUMER, 0, client_rack="")
        assert out_of_sync.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert out_of_sync.current_leader == (2, EPOCH)
    finally:
        replicas.close()
