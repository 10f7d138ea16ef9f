"""Partition replication under real faults: leaders killed and paused, a network partition, every
node restarted, a follower that lost its unsynced tail. Each run records what real idempotent
acks=all producers were told and what the log holds afterwards, and a Jepsen-style checker
(jepsen.py) reports lost, duplicated, reordered or misplaced records; replicas are compared
record for record once they are in sync again."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from cluster_support import NetnsFabric, wait_for
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from jepsen import History, Workload, check, read_all
from pylog.storage import read_segments
from pylog.storage.checkpoint import read_log_start_offset

from pylog.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 3
TOPIC = "jepsen"


def create_replicated(
    bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS, rf: int = 3, min_isr: int = 2
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, rf, config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([new], request_timeout=30)[topic].result(30)


def partition_state(bootstrap: str, topic: str, p: int) -> tuple[int, list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    part = md.topics[topic].partitions[p]
    return part.leader, list(part.isrs)


def leader_of(cluster: LocalCluster, topic: str, p: int) -> int:
    return wait_for(lambda: _live_leader(cluster, topic, p), 20, f"a leader for {topic}-{p}")


def _live_leader(cluster: LocalCluster, topic: str, p: int) -> int | None:
    bs = ",".join(n.bootstrap for n in cluster.nodes.values() if n.running)
    leader, _ = partition_state(bs, topic, p)
    return leader if leader in cluster.nodes and cluster.node(leader).running else None


def wait_all_in_sync(
    cluster: LocalCluster,
    topic: str = TOPIC,
    partitions: int = PARTITIONS,
    rf: int = 3,
    timeout_s: float = 45,
) -> None:
    bs = ",".join(n.bootstrap for n in cluster.nodes.values() if n.running)

    def in_sync() -> bool:
        return all(len(partition_state(bs, topic, p)[1]) == rf for p in range(partitions))

    wait_for(in_sync, timeout_s, f"every replica of {topic} back in the ISR", interval_s=0.3)


def replicas_identical(cluster: LocalCluster, topic: str = TOPIC, partitions: int = PARTITIONS) -> None:
    """Every node's copy of every partition holds the same offsets and values (once in sync)."""

    def same() -> bool:
        for p in range(partitions):
            copies = []
            for n in cluster.nodes.values():
                t = read_segments(n.data_dir / f"{topic}-{p}")
                t = t.filter(pc.invert(pc.is_null(t.column("value"))))
                copies.append((t.column("offset").to_pylist(), t.column("value").to_pylist()))
            if any(c != copies[0] for c in copies):
                return False
        return True

    wait_for(same, 30, "identical replicas", interval_s=0.5)


class GroupConsumer:
    """A consumer group member that commits as it goes, remembering what the broker accepted."""

    def __init__(self, bootstrap: str, topic: str, history: History) -> None:
        self.bootstrap, self.topic, self.history = bootstrap, topic, history
        self.committed: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> GroupConsumer:
        self._thread.start()
        return self

    def _run(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "jepsen-group",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
            }
        )
        c.subscribe([self.topic])
        session = 0
        seen = 0
        try:
            while not self._stop.is_set():
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                self.history.sessions[(f"group-{session}", m.partition())].append(m.offset())
                seen += 1
                if seen % 200 == 0:
                    try:
                        for tp in c.commit(asynchronous=False):
                            if tp.error is None and tp.offset >= 0:
                                self.committed[tp.partition] = max(
                                    self.committed.get(tp.partition, 0), tp.offset
                                )
                    except KafkaException:
                        session += 1  # a failed commit may come with a rebalance: a new session
        finally:
            c.close()

    def cancel(self) -> None:
        """Tell the consumer to end, without waiting (a failed test's clean-up)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def committed_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        }
    finally:
        c.close()


def finish(cluster: LocalCluster, workload: Workload, history: History) -> None:
    workload.stop()
    wait_all_in_sync(cluster)
    read_all(cluster.bootstrap_servers, TOPIC, PARTITIONS, history)
    report = check(history)
    print(f"jepsen history: {report}")  # shown with -s / -rP: what the run sent, acknowledged and read
    assert report.ok, str(report)
    assert report.acknowledged > 1000, str(report)
    replicas_identical(cluster)


# ---------------------------------------------------------------------------------------------


def test_leader_killed_three_times_and_paused_once_loses_nothing(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create_replicated(cluster.bootstrap_servers)
    history = History()
    workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS, history).start()
    group = GroupConsumer(cluster.bootstrap_servers, TOPIC, history).start()
    time.sleep(2)
    for _ in range(3):
        victim = leader_of(cluster, TOPIC, 0)
        cluster.kill(victim)
        wait_for(lambda v=victim: leader_of(cluster, TOPIC, 0) != v, 10, "a new leader")
        time.sleep(1)
        cluster.start_node(victim)
        wait_all_in_sync(cluster)
    victim = leader_of(cluster, TOPIC, 0)
    cluster.pause(victim)
    try:
        wait_for(lambda: _live_leader(cluster, TOPIC, 0) not in (None, victim), 15, "a leader while paused")
        time.sleep(1)
    finally:
        cluster.resume(victim)
    time.sleep(2)
    group.stop()
    finish(cluster, workload, history)
    kept = committed_offsets(cluster.bootstrap_servers, TOPIC, "jepsen-group")
    for p, offset in group.committed.items():
        assert kept[p] >= offset, f"partition {p}: committed {offset}, the group now has {kept[p]}"


def test_a_network_partition_isolating_the_leader_loses_nothing(tmp_path: Path, cluster_factory: Any) -> None:
    with NetnsFabric(3) as net:
        cluster: LocalCluster = cluster_factory(cluster=net.cluster(tmp_path / "net"))
        create_replicated(cluster.bootstrap_servers)
        history = History()
        workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS, history).start()
        time.sleep(2)
        victim = leader_of(cluster, TOPIC, 0)
        net.isolate(victim)
        try:
            others = ",".join(n.bootstrap for n in cluster.nodes.values() if n.node_id != victim)
            wait_for(
                lambda: partition_state(others, TOPIC, 0)[0] not in (victim, -1), 15, "the majority elects"
            )
            time.sleep(3)
        finally:
            net.heal(victim)
        time.sleep(2)
        finish(cluster, workload, history)


def test_every_node_restarted_cleanly_then_killed_loses_nothing(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create_replicated(cluster.bootstrap_servers)
    history = History()
    workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS, history).start()
    time.sleep(2)
    for hard in (False, True):
        for node in list(cluster.nodes):
            cluster.restart(node, hard=hard)
            wait_all_in_sync(cluster)
    finish(cluster, workload, history)


def test_a_follower_that_lost_its_unsynced_tail_catches_up(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create_replicated(cluster.bootstrap_servers)
    history = History()
    workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS, history).start()
    time.sleep(3)
    leader = leader_of(cluster, TOPIC, 0)
    follower = next(n for n in cluster.nodes if n != leader)
    cluster.kill(follower)
    lost = 0
    for p in range(PARTITIONS):  # what the page cache held and the disk did not: gone
        segments = sorted((cluster.node(follower).data_dir / f"{TOPIC}-{p}").glob("*.arrows"))
        if segments:
            data = segments[-1]
            size = data.stat().st_size
            keep = size * 2 // 3
            with open(data, "r+b") as f:
                f.truncate(keep)
            lost += size - keep
    assert lost > 0
    cluster.start_node(follower)
    time.sleep(2)
    finish(cluster, workload, history)


def test_transactions_across_a_leader_failover(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create_replicated(cluster.bootstrap_servers, "txn", partitions=2)
    bs = cluster.bootstrap_servers
    p = Producer(
        {"bootstrap.servers": bs, "transactional.id": "failover-txn", "transaction.timeout.ms": 60000}
    )
    p.init_transactions(60)
    committed, aborted, unknown = [], [], []
    victim = None
    for k in range(30):
        if k == 10:
            victim = leader_of(cluster, "txn", 0)
            cluster.kill(victim)
        if k == 20 and victim is not None:
            cluster.start_node(victim)
        values = [f"t{k}-{i}".encode() for i in range(10)]
        try:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.produce("txn", v, partition=i % 2)
            if k % 3 == 2:
                p.abort_transaction(60)
                aborted.append(k)
            else:
                p.commit_transaction(60)
                committed.append(k)
        except KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                p.abort_transaction(60)
                aborted.append(k)
            elif err.retriable():
                unknown.append(k)  # either all of it is visible or none: checked below
                p.abort_transaction(60)
            else:
                raise
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "txn-check",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition("txn", 0, 0), TopicPartition("txn", 1, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    want = len(committed) * 10
    while len(got) < want and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    time.sleep(1)
    while (m := c.poll(1.0)) is not None:
        if not m.error():
            got.append(m.value())
    c.close()
    by_txn: dict[int, list[bytes]] = {}
    for v in got:
        by_txn.setdefault(int(v.decode().split("-")[0][1:]), []).append(v)
    assert len(got) == len(set(got)), "a committed record was read twice"
    for k in committed:
        assert len(by_txn.get(k, [])) == 10, f"committed transaction {k} is not wholly visible"
    for k in aborted:
        assert k not in by_txn, f"aborted transaction {k} is visible"
    for k in unknown:
        assert len(by_txn.get(k, [])) in (0, 10), f"transaction {k} is partly visible"


def test_consumers_never_read_at_or_past_the_high_watermark(cluster_factory: Any) -> None:
    # a follower that is alive but slow stays in the ISR: no lag or session timeout during the test
    cluster: LocalCluster = cluster_factory(
        3, {"replica.lag.time.max.ms": "60000", "broker.session.timeout.ms": "60000"}
    )
    create_replicated(cluster.bootstrap_servers, "hw", partitions=1, min_isr=1)
    bs = cluster.bootstrap_servers
    leader = leader_of(cluster, "hw", 0)
    lagging = next(n for n in cluster.nodes if n != leader)
    p = Producer({"bootstrap.servers": bs, "acks": 1})
    for i in range(100):
        p.produce("hw", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": "hw", "enable.auto.commit": False})
    wait_for(lambda: c.get_watermark_offsets(TopicPartition("hw", 0), timeout=5)[1] == 100, 10, "all in sync")
    # The group's coordinator is found before the pause: its lookup would otherwise wait on
    # __consumer_offsets replicating to the paused node, holding back the requests behind it.
    c.committed([TopicPartition("hw", 0)], timeout=30)
    cluster.pause(lagging)  # still in the ISR (replica.lag.time.max.ms 30 s), fetching nothing
    try:
        for i in range(100, 200):
            p.produce("hw", str(i).encode(), partition=0)
        assert p.flush(30) == 0  # acks=1: the leader has them
        high = None
        deadline = time.monotonic() + 30
        while high is None and time.monotonic() < deadline:
            try:
                _, high = c.get_watermark_offsets(TopicPartition("hw", 0), timeout=5)
            except KafkaException:  # the client asked the paused node for metadata: ask again
                pass
        assert high == 100, f"the high watermark moved to {high} while an in-sync follower had nothing"
        c.assign([TopicPartition("hw", 0, 0)])
        offsets = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                offsets.append(m.offset())
        assert offsets == list(range(100)), "a consumer read past the high watermark"
    finally:
        cluster.resume(lagging)
    wait_for(lambda: c.get_watermark_offsets(TopicPartition("hw", 0), timeout=5)[1] == 200, 20, "caught up")
    c.close()


def test_acks_all_is_refused_below_min_insync_replicas(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    controller = cluster.controller_id()
    pair = [n for n in cluster.nodes if n != controller]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(
        "min-isr", num_partitions=1, replica_assignment=[pair], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([new], request_timeout=30)["min-isr"].result(30)
    leader = leader_of(cluster, "min-isr", 0)
    cluster.kill(next(n for n in pair if n != leader))
    wait_for(
        lambda: len(partition_state(cluster.node(leader).bootstrap, "min-isr", 0)[1]) == 1, 15, "ISR of one"
    )
    from kafka import KafkaProducer
    from kafka.errors import NotEnoughReplicasError

    kp = KafkaProducer(
        bootstrap_servers=cluster.node(leader).bootstrap, acks="all", retries=0, enable_idempotence=False
    )
    try:
        with pytest.raises(NotEnoughReplicasError):
            kp.send("min-isr", b"x", partition=0).get(timeout=20)
        kp1 = KafkaProducer(
            bootstrap_servers=cluster.node(leader).bootstrap, acks=1, retries=0, enable_idempotence=False
        )
        assert kp1.send("min-isr", b"y", partition=0).get(timeout=20).offset == 0
        kp1.close()
    finally:
        kp.close()


def test_delete_records_answers_once_every_live_replica_moved_its_log_start(cluster_factory: Any) -> None:
    """DeleteRecords answers with the low watermark once every replica on a live broker has moved
    its log start (Kafka's DelayedDeleteRecords): the followers' checkpoints already hold it.
    With a live follower that fetches nothing, the request times out instead."""
    cluster: LocalCluster = cluster_factory(3, {"broker.session.timeout.ms": "60000"})
    create_replicated(cluster.bootstrap_servers, "dr", partitions=1, min_isr=2)
    bs = cluster.bootstrap_servers
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(100):
        p.produce("dr", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bs})
    (done,) = admin.delete_records([TopicPartition("dr", 0, 50)], operation_timeout=20).values()
    assert done.result(30).low_watermark == 50
    starts = {n: read_log_start_offset(node.data_dir / "dr-0") for n, node in cluster.nodes.items()}
    assert starts == {n: 50 for n in cluster.nodes}, starts

    leader = leader_of(cluster, "dr", 0)
    stalled = next(n for n in cluster.nodes if n != leader)
    cluster.pause(stalled)  # alive for the controller (60 s session), fetching nothing
    try:
        (late,) = admin.delete_records([TopicPartition("dr", 0, 80)], operation_timeout=2).values()
        with pytest.raises(KafkaException) as info:
            late.result(30)
        assert info.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT, info.value
    finally:
        cluster.resume(stalled)
    wait_for(lambda: read_log_start_offset(cluster.node(stalled).data_dir / "dr-0") == 80, 20, "caught up")
