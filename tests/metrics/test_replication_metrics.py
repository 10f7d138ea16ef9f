"""Replication in the metrics: a partition moved onto a second broker under throttles (KIP-73)
shows the throttled bytes on the leader and on the new replica, and the bytes the reassignment
moved on the leader; reading the quotas for a scrape leaves what they decide unchanged."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

import pylog
from pylog.clock import ManualClock
from pylog.quotas.replication import ALL_REPLICAS, ReplicationQuota

TOPIC = "moving"
RECORDS, RECORD_BYTES = 300, 1000
THROTTLES = {"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "*"}


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    vals = [v for lv, v in found.get(name, []) if all(lv.get(k) == x for k, x in labels.items())]
    assert vals, f"no {name}{labels}"
    return sum(vals)


def wait_until(check, timeout_s: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def moved() -> Iterator[pylog.LocalCluster]:
    """Two nodes; ``moving``'s only partition is written on node 1, then moved onto [1, 2] with
    both replicas throttled (at a rate far above what the move needs: it is counted, not slowed)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    config = {"leader.replication.throttled.rate": "500000000",
              "follower.replication.throttled.rate": "500000000",
              "schema.registry.listeners": ""}
    with pylog.LocalCluster(2, config=config) as cluster:
        leader = cluster.node(1)
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        new = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1]], config=THROTTLES)
        admin.create_topics([new])[TOPIC].result(30)
        p = Producer({"bootstrap.servers": leader.bootstrap, "linger.ms": 5})
        for i in range(RECORDS):
            p.produce(TOPIC, value=b"%0*d" % (RECORD_BYTES, i), partition=0)
        assert p.flush(30) == 0
        moves = KafkaAdminClient(bootstrap_servers=leader.bootstrap)
        try:
            assert moves.alter_partition_reassignments({TopicPartition(TOPIC, 0): [1, 2]}) == {
                TopicPartition(TOPIC, 0): None}
            wait_until(lambda: moves.list_partition_reassignments() == {}, 60, "the move to finish")
        finally:
            moves.close()
        yield cluster


def test_a_throttled_move_shows_its_bytes_on_leader_and_new_replica(moved: pylog.LocalCluster) -> None:
    leader = scrape(moved.node(1).metrics_url or "")
    follower = scrape(moved.node(2).metrics_url or "")
    assert value(follower, "kafka_log_log_logendoffset", topic=TOPIC, partition="0") == RECORDS
    # every byte the follower fetched of the partition was throttled: the leader's quota counted
    # what it sent to followers, the follower's what its fetcher appended, the same batches
    sent = value(leader, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic=TOPIC)
    assert sent > RECORDS * RECORD_BYTES
    assert value(leader, "pylog_replication_throttled_bytes_total", quota="LeaderReplication") == sent
    assert value(follower, "pylog_replication_throttled_bytes_total", quota="FollowerReplication") == sent
    # the follower fetched it all while the reassignment was adding it (Kafka's ReassignmentBytesOut)
    assert value(leader, "kafka_server_brokertopicmetrics_reassignmentbytesout_total") == sent
    assert value(follower, "kafka_server_brokertopicmetrics_reassignmentbytesout_total") == 0
    # and appended all of it as the replica being added (ReplicationBytesIn, ReassignmentBytesIn)
    assert value(follower, "kafka_server_brokertopicmetrics_replicationbytesin_total", topic=TOPIC) == sent
    assert value(follower, "kafka_server_brokertopicmetrics_reassignmentbytesin_total") == sent
    assert value(leader, "kafka_server_brokertopicmetrics_reassignmentbytesin_total") == 0
    # nothing moves the other way
    assert value(leader, "pylog_replication_throttled_bytes_total", quota="FollowerReplication") == 0
    assert value(follower, "pylog_replication_throttled_bytes_total", quota="LeaderReplication") == 0
    # Kafka's byte-rate gauges are there on both (their value decays with the quota's windows)
    for found in (leader, follower):
        for quota in ("leaderreplication", "followerreplication"):
            assert value(found, f"kafka_server_{quota}_byte_rate") >= 0
    assert value(leader, "pylog_metrics_collect_errors_total") == 0


def test_reading_a_quota_changes_nothing_it_decides() -> None:
    """Two quotas fed the same bytes at the same times; one is read (as a scrape reads it) after
    every step, much later than the event loop's clock: both throttle alike throughout."""
    clock = ManualClock()
    read, alone = ReplicationQuota(3, 1000, 2000), ReplicationQuota(3, 1000, 2000)
    for q in (read, alone):
        q.mark_throttled("t", ALL_REPLICAS)
    for step in range(40):
        now = clock.monotonic_ms()
        for q in (read, alone):
            q.record(700 if step % 3 else 2500, now)
        rate = read.byte_rate(now)
        assert rate == alone.byte_rate(now) > 0
        read.byte_rate(now + 10_000)  # a scrape whose clock is far ahead: the windows it expires are a copy's
        assert read.exceeded(now) == alone.exceeded(now)
        assert read.delay_ms(now) == alone.delay_ms(now)
        assert read.bytes_total == alone.bytes_total
        clock.advance(350)
    assert read.bytes_total == sum(700 if s % 3 else 2500 for s in range(40))
    assert read.byte_rate(clock.monotonic_ms() + 10_000) == 0.0
