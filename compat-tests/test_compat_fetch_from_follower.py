"""Fetch from follower (KIP-392) on a 3-node cluster with racks r1, r2, r3 and
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``.

confluent-kafka's consumer with ``client.rack=r2`` reads a partition led in r1 from the in-sync
follower in r2 (its statistics name the broker it fetches from beside the leader); when that
follower is stopped (SIGSTOP, it leaves the ISR) it goes back to the leader, returns to the
follower once it is in sync again, and goes back to the leader when it dies (kill -9): every
record read once.
Raw Fetch v11 requests (kafka-python's codec) check the values: ``preferred_read_replica`` is the
r2 follower from the leader, -1 for a client in the leader's rack, with no rack, at Fetch v10 and
from a follower; a follower serves records up to its high watermark; a broker holding no replica
answers NOT_LEADER_OR_FOLLOWER; an offset past a follower's log end is OFFSET_OUT_OF_RANGE, one
between its high watermark and log end gets no records yet; ListOffsets stays with the leader;
Metadata names each broker's rack. A broker with an unknown selector class refuses to start."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import kp_wire
import pytest
from cluster_support import wait_for
from compat_raw import RawConn, list_offset
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from pylog.protocol.errors import ErrorCode

from pylog.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(300)

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "racked"
N = 2000


def _produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(TOPIC, key=str(i).encode(), value=f"v{i}".encode(), partition=0)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "records left unacknowledged"


def _fetch(address: str, version: int, offset: int, rack: str = "", topic: str = TOPIC) -> Any:
    T = FetchRequest[version].FetchTopic
    partition = T.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [T(topic=topic, partitions=[partition])],
        "forgotten_topics_data": [],
    }
    if version >= 11:
        fields["rack_id"] = rack
    resp = kp_wire.call(address, FetchRequest, version, **fields)
    return resp.responses[0].partitions[0]


class _Stats:
    """The latest librdkafka statistics: which broker each partition is fetched from."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] = {}

    def __call__(self, text: str) -> None:
        self.latest = json.loads(text)

    def partition(self) -> dict[str, Any]:
        return self.latest.get("topics", {}).get(TOPIC, {}).get("partitions", {}).get("0", {})

    def fetched_from(self) -> int | None:
        p = self.partition()
        return p.get("broker") if p else None


def _consume(consumer: Consumer, seen: list[int], until: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while len(seen) < until and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            assert not m.error(), m.error()
            seen.append(int(m.key()))


def _await_stats(consumer: Consumer, stats: _Stats, ok: Any, what: str) -> None:
    """Poll (statistics arrive through poll) until the fetch broker satisfies ``ok``."""

    def check() -> bool:
        assert consumer.poll(0.2) is None, "no record is left to read"
        return bool(ok(stats.fetched_from()))

    try:
        wait_for(check, 20, what)
    except AssertionError:
        print(json.dumps(stats.partition(), indent=1))
        raise


@pytest.fixture(scope="module")
def cluster() -> Any:
    config = {"replica.selector.class": RACK_AWARE, "replica.lag.time.max.ms": "4000"}
    with LocalCluster(3, racks=["r1", "r2", "r3"], config=config) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        topic = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])
        admin.create_topics([topic])[TOPIC].result(30)
        _produce(c.bootstrap_servers, 0, N)
        yield c


def test_preferred_read_replica_values(cluster: LocalCluster) -> None:
    leader, follower, other = (cluster.node(i).bootstrap for i in (1, 2, 3))

    def r2_preferred() -> Any:
        p = _fetch(leader, 11, 0, rack="r2")
        return p if p.preferred_read_replica == 2 else None

    p = wait_for(r2_preferred, 30, "the leader naming the r2 follower")
    assert p.error_code == 0 and not p.records, "a redirected partition carries no records"
    assert p.high_watermark == N
    assert _fetch(leader, 11, 0, rack="r3").preferred_read_replica == 3
    same_rack = _fetch(leader, 11, 0, rack="r1")
    assert same_rack.preferred_read_replica == -1 and same_rack.records, "the leader's rack reads here"
    assert _fetch(leader, 11, 0, rack="").preferred_read_replica == -1
    assert _fetch(leader, 11, 0, rack="r9").preferred_read_replica == -1
    older = _fetch(leader, 10, 0)
    assert older.error_code == 0 and older.records

    # the follower serves v11+ consumers up to its high watermark, and names no one else
    def follower_caught_up() -> Any:
        a = _fetch(follower, 11, 0, rack="r2")
        return a if a.error_code == 0 and a.high_watermark == N and a.records else None

    served = wait_for(follower_caught_up, 30, "the r2 follower serving records")
    assert served.preferred_read_replica == -1
    assert _fetch(follower, 11, N).error_code == 0  # at its high watermark: nothing yet
    assert _fetch(follower, 11, N + 10).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # before v11 a consumer reads from the leader only
    assert _fetch(follower, 10, 0).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _fetch(other, 11, 0, rack="r3").error_code == 0

    # ListOffsets stays with the leader
    host, _, port = follower.rpartition(":")
    with RawConn(host, int(port)) as conn:
        assert list_offset(conn, TOPIC, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    host, _, port = leader.rpartition(":")
    with RawConn(host, int(port)) as conn:
        assert list_offset(conn, TOPIC, 0) == (0, N)


def test_metadata_advertises_racks(cluster: LocalCluster) -> None:
    md = kp_wire.call(cluster.node(1).bootstrap, MetadataRequest, 1, topics=None)
    assert {b.node_id: b.rack for b in md.brokers} == {1: "r1", 2: "r2", 3: "r3"}


def test_a_broker_without_the_replica_answers_not_leader_or_follower(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("elsewhere", num_partitions=1, replica_assignment=[[1, 3]])])[
        "elsewhere"
    ].result(30)

    def answer() -> int | None:
        code = _fetch(cluster.node(2).bootstrap, 11, 0, rack="r2", topic="elsewhere").error_code
        return code if code == ErrorCode.NOT_LEADER_OR_FOLLOWER else None

    wait_for(answer, 30, "NOT_LEADER_OR_FOLLOWER from a broker without the replica")


def test_consumer_in_r2_reads_from_the_r2_follower_then_the_leader(cluster: LocalCluster) -> None:
    stats = _Stats()
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "racked-reader",
            "client.rack": "r2",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": stats,
            "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 5000,  # a stopped broker's fetch fails in seconds, not a minute
        }
    )
    others = f"{cluster.node(1).bootstrap},{cluster.node(3).bootstrap}"
    seen: list[int] = []
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        _consume(consumer, seen, N, 60)
        assert sorted(seen) == list(range(N))
        _await_stats(consumer, stats, lambda b: b == 2, "statistics naming broker 2 as the fetch broker")
        part = stats.partition()
        print(f"\nr2 consumer: partition 0 leader {part['leader']}, fetched from broker {part['broker']}")
        assert part["leader"] == 1
        rx = {b["nodeid"]: b["rxbytes"] for b in stats.latest["brokers"].values() if b.get("nodeid", -1) >= 0}
        print(f"bytes received per broker: {rx}")
        values = sum(len(f"v{i}") for i in range(N))
        assert rx[2] > values, "the records came from broker 2"

        # SIGSTOP: the r2 follower answers nothing and leaves the ISR (acks=all records are
        # acknowledged without it); the consumer's fetch there fails and it reads on at the leader
        cluster.pause(2)
        try:
            _produce(others, N, N)
            _consume(consumer, seen, 2 * N, 90)
            _await_stats(consumer, stats, lambda b: b in (1, 3), "statistics naming a running fetch broker")
            print(f"while broker 2 is stopped: fetched from broker {stats.fetched_from()}")
        finally:
            cluster.resume(2)

        # back in the ISR, the r2 follower is named again
        _produce(cluster.bootstrap_servers, 2 * N, N)
        _consume(consumer, seen, 3 * N, 90)
        _await_stats(consumer, stats, lambda b: b == 2, "broker 2 named again once back in the ISR")

        cluster.kill(2)  # the r2 follower dies: the consumer goes back to the leader
        _produce(others, 3 * N, N)
        _consume(consumer, seen, 4 * N, 90)
        assert len(seen) == len(set(seen)), "a record was read twice"
        assert sorted(seen) == list(range(4 * N)), f"{4 * N - len(set(seen))} record(s) missing"
        _await_stats(consumer, stats, lambda b: b in (1, 3), "statistics naming a live fetch broker")
        print(f"after kill -9 of broker 2: fetched from broker {stats.fetched_from()}")
    finally:
        consumer.close()


def test_unknown_replica_selector_class_is_refused_at_start(tmp_path: Any) -> None:
    exe = [sys.executable, "-m", "pylog", "broker", "--data-dir", str(tmp_path), "--listen", "127.0.0.1:0",
           "--config", "replica.selector.class=com.example.NoSuchSelector"]
    done = subprocess.run(exe, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "replica.selector.class" in done.stderr and "RackAwareReplicaSelector" in done.stderr, done.stderr
