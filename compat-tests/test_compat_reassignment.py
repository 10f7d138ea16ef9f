"""Partitions moving between real broker processes: kafka-python's admin reassignment calls, the
`pylog` CLI (rebalance, remove-broker, topic reassign), Kafka's errors for bad plans, and moves
under load with the Jepsen-style checker: (a) 12 partitions spread from 3 brokers to 4, (b) a
leader killed -9 in the middle of a move, (c) a broker removed under load. Every acknowledged
record is read back once and in order, replicas are identical afterwards and no partition keeps
a stale replica set."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from cluster_support import wait_for
from confluent_kafka.admin import AdminClient, NewTopic
from jepsen import History, Workload, check, read_all
from pylog.storage import read_segments
from test_replication import GroupConsumer

from pylog.local_cluster import LocalCluster
from pylog.sdk.cluster_admin import ClusterAdminSync, ClusterState

pytestmark = pytest.mark.timeout(420)

TOPIC = "moving"
PARTITIONS = 12


def pylog_cli(*args: str, bootstrap: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("pylog")
    env = dict(os.environ, PYLOG_BOOTSTRAP_SERVERS=bootstrap)
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=env)


def create(bootstrap: str, topic: str = TOPIC, partitions: int = PARTITIONS, rf: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, rf, config={"min.insync.replicas": "2"})
    admin.create_topics([new], request_timeout=30)[topic].result(30)

    def known() -> bool:
        parts = state_of(bootstrap).partitions
        return all((topic, p) in parts and parts[(topic, p)].leader >= 0 for p in range(partitions))

    wait_for(known, 30, f"{topic} in the metadata of every broker")


def state_of(bootstrap: str) -> ClusterState:
    """What the broker each bootstrap address names says (each must know the topic)."""
    states = []
    for address in bootstrap.split(","):
        with ClusterAdminSync(address) as admin:
            states.append(admin.state())
    return min(states, key=lambda s: len(s.partitions))


def state(cluster: LocalCluster) -> ClusterState:
    with ClusterAdminSync(running(cluster)) as admin:
        return admin.state()


def stuck(cluster: LocalCluster) -> str:
    """What a stalled move is waiting for, shortest first: the controller, the moves in flight and
    the partitions whose ISR is short (a failure message is read from its start)."""
    try:
        s = state(cluster)
    except Exception as exc:  # the cluster does not answer: that is the news
        return f"no cluster state: {exc!r}"
    moving = [f"{p.topic}-{p.partition} r={p.replicas} isr={p.isr} +{p.adding} -{p.removing} "
              f"leader={p.leader}" for p in s.partitions.values() if p.adding or p.removing]
    short = [f"{p.topic}-{p.partition} r={p.replicas} isr={p.isr} leader={p.leader}"
             for p in s.under_replicated if not (p.adding or p.removing)]
    return (f"controller {s.controller_id}, brokers {sorted(s.brokers)}; moving {len(moving)}: "
            f"{'; '.join(moving[:8])}; short ISR {len(short)}: {'; '.join(short[:8])}")


def running(cluster: LocalCluster) -> str:
    return ",".join(n.bootstrap for n in cluster.nodes.values() if n.running and not n.removed)


def settled(
    cluster: LocalCluster, topic: str = TOPIC, partitions: int = PARTITIONS, timeout_s: float = 60
) -> None:
    """No move in flight and every replica of ``topic`` in sync."""

    seen: list[Any] = []

    def done() -> bool:
        s = state(cluster)
        parts = [s.partitions[(topic, p)] for p in range(partitions)]
        seen[:] = [p for p in parts if len(p.isr) != len(p.replicas) or p.leader < 0] + s.reassignments
        return not seen

    try:
        wait_for(done, timeout_s, f"{topic}: moves done and every replica in sync", interval_s=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still unsettled: {seen}") from None


def replicas_identical_and_no_strays(cluster: LocalCluster, topic: str = TOPIC,
                                     partitions: int = PARTITIONS) -> None:
    """Each partition's replicas (as the metadata names them) hold the same records, and no other
    node keeps a copy."""

    def same() -> bool:
        s = state(cluster)
        for p in range(partitions):
            replicas = s.partitions[(topic, p)].replicas
            copies = []
            for n in cluster.nodes.values():
                path = n.data_dir / f"{topic}-{p}"
                if n.node_id not in replicas:
                    if path.exists():
                        return False
                    continue
                t = read_segments(path)
                t = t.filter(pc.invert(pc.is_null(t.column("value"))))
                copies.append((t.column("offset").to_pylist(), t.column("value").to_pylist()))
            if any(c != copies[0] for c in copies):
                return False
        return True

    wait_for(same, 60, "identical replicas and no stray copies", interval_s=1.0)


def finish(
    cluster: LocalCluster, workload: Workload, history: History, group: GroupConsumer, name: str
) -> None:
    time.sleep(2)
    group.stop()
    workload.stop()
    settled(cluster)
    read_all(running(cluster), TOPIC, PARTITIONS, history)
    report = check(history)
    print(f"jepsen {name}: {report}")
    assert report.ok, str(report)
    assert report.acknowledged > 2000, str(report)
    replicas_identical_and_no_strays(cluster)
    kept = committed_offsets_all(running(cluster))
    for p, offset in group.committed.items():
        assert kept[p] >= offset, f"partition {p}: committed {offset}, the group now has {kept[p]}"


def committed_offsets_all(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-group", "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset
                for tp in c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)}
    finally:
        c.close()


_loads: list[Workload | GroupConsumer] = []


@pytest.fixture(autouse=True)
def _cancel_loads() -> Iterator[None]:
    """A test that fails midway leaves no producer or consumer running against its dead cluster."""
    yield
    while _loads:
        _loads.pop().cancel()


def load(cluster: LocalCluster, rate: float = 1000) -> tuple[History, Workload, GroupConsumer]:
    history = History()
    workload = Workload(cluster.bootstrap_servers, TOPIC, PARTITIONS, history, rate=rate).start()
    group = GroupConsumer(cluster.bootstrap_servers, TOPIC, history).start()
    _loads.extend((workload, group))
    time.sleep(3)
    return history, workload, group


# ---------------------------------------------------------------------------------------------
# real clients, bad input


def test_kafka_python_admin_moves_lists_and_cancels(cluster_factory: Any) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    cluster: LocalCluster = cluster_factory(3)
    create(cluster.bootstrap_servers, "kp", 2, 2)
    new = cluster.add_node(rack="r4")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        s = state(cluster)
        before = {p: s.partitions[("kp", p)].replicas for p in range(2)}
        assert s.brokers[new].rack == "r4"
        # bad plans: Kafka's errors, nothing changes
        bad = admin.alter_partition_reassignments({
            TopicPartition("kp", 0): [1, 99],
            TopicPartition("kp", 1): [2, 2],
            TopicPartition("nope", 0): [1, 2],
        })
        assert bad[TopicPartition("kp", 0)] is InvalidReplicationAssignmentError
        assert bad[TopicPartition("kp", 1)] is InvalidReplicationAssignmentError
        assert bad[TopicPartition("nope", 0)] is UnknownTopicOrPartitionError
        assert admin.list_partition_reassignments() == {}
        s = state(cluster)
        assert {p: s.partitions[("kp", p)].replicas for p in range(2)} == before
        cancel = admin.alter_partition_reassignments({TopicPartition("kp", 0): None})
        assert cancel[TopicPartition("kp", 0)] is NoReassignmentInProgressError
        # a real move: partition 0 onto the new broker
        keep = before[0][0]
        ok = admin.alter_partition_reassignments({TopicPartition("kp", 0): [new, keep]})
        assert ok == {TopicPartition("kp", 0): None}
        settled(cluster, "kp", 2)
        assert state(cluster).partitions[("kp", 0)].replicas == (new, keep)
        # a move in flight is listed, then cancelled (the new replica cannot finish: its broker is
        # stopped)
        cluster.stop_node(new)
        wait_for(lambda: new not in state(cluster).brokers, 20, "the broker fenced")
        # kafka-python keeps the controller the first Metadata named (any live broker, as in KRaft,
        # which may be the one just stopped): a new admin asks again
        admin.close()
        admin = KafkaAdminClient(bootstrap_servers=running(cluster))
        assert admin.alter_partition_reassignments({TopicPartition("kp", 1): [new, *before[1][:1]]}) == {
            TopicPartition("kp", 1): None}
        listed = admin.list_partition_reassignments()
        got = listed[TopicPartition("kp", 1)]
        assert got["adding_replicas"] == [new] and set(got["removing_replicas"]) == set(before[1][1:])
        assert admin.alter_partition_reassignments({TopicPartition("kp", 1): None}) == {
            TopicPartition("kp", 1): None}
        assert admin.list_partition_reassignments() == {}
        assert set(state(cluster).partitions[("kp", 1)].replicas) == set(before[1])
    finally:
        admin.close()


def test_cli_topic_reassign_plan_list_and_bad_plans(cluster_factory: Any, tmp_path: Path) -> None:
    cluster: LocalCluster = cluster_factory(3)
    bs = cluster.bootstrap_servers
    create(bs, "cli", 3, 2)
    before = {p: state(cluster).partitions[("cli", p)].replicas for p in range(3)}
    plan = tmp_path / "plan.json"
    bad_plans = {
        "unknown broker": [{"topic": "cli", "partition": 0, "replicas": [1, 42]}],
        "twice": [{"topic": "cli", "partition": 0, "replicas": [1, 1]}],
        "unknown topic": [{"topic": "missing", "partition": 0, "replicas": [1, 2]}],
        "empty": [{"topic": "cli", "partition": 0, "replicas": []}],
    }
    expected = {"unknown broker": "INVALID_REPLICA_ASSIGNMENT", "twice": "INVALID_REPLICA_ASSIGNMENT",
                "unknown topic": "UNKNOWN_TOPIC_OR_PARTITION", "empty": "INVALID_REPLICA_ASSIGNMENT"}
    for name, parts in bad_plans.items():
        plan.write_text(json.dumps({"version": 1, "partitions": parts}))
        r = pylog_cli("topic", "reassign", "--plan", str(plan), bootstrap=bs)
        assert r.returncode == 1, (name, r.stdout, r.stderr)
        assert expected[name] in r.stdout + r.stderr, (name, r.stdout, r.stderr)
    plan.write_text("{not json")
    r = pylog_cli("topic", "reassign", "--plan", str(plan), bootstrap=bs)
    assert r.returncode == 1 and "not JSON" in r.stderr
    assert {p: state(cluster).partitions[("cli", p)].replicas for p in range(3)} == before
    # a good plan, in Kafka's format (log_dirs included), run to the end
    target = {p: tuple(b for b in (1, 2, 3) if b != before[p][0]) for p in range(3)}
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "cli", "partition": p, "replicas": list(r), "log_dirs": ["any", "any"]}
        for p, r in target.items()]}))
    r = pylog_cli("topic", "reassign", "--plan", str(plan), "--throttle", "50000000", bootstrap=bs)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3/3 partition(s) moved" in r.stdout
    s = state(cluster)
    assert {p: s.partitions[("cli", p)].replicas for p in range(3)} == target
    # the throttles were set and are gone again
    admin = AdminClient({"bootstrap.servers": bs})
    from confluent_kafka.admin import ConfigResource

    res = ConfigResource("TOPIC", "cli")
    configs = admin.describe_configs([res])[res].result(10)
    assert not configs["leader.replication.throttled.replicas"].value
    r = pylog_cli("topic", "reassign", "--list", bootstrap=bs)
    assert r.returncode == 0 and "cli" not in r.stdout
    r = pylog_cli("cluster", "describe", "--format", "json", bootstrap=bs)
    data = json.loads(r.stdout)
    assert {b["node_id"] for b in data["brokers"]} == {1, 2, 3}
    assert sum(b["replicas"] for b in data["brokers"]) >= 6 and data["reassignments"] == []
    # removing a broker that is not there is refused; UnregisterBroker answers Kafka's error
    r = pylog_cli("cluster", "remove-broker", "7", bootstrap=bs)
    assert r.returncode == 1 and "not in the cluster" in r.stderr
    from pylog.protocol.errors import ErrorCode

    with ClusterAdminSync(bs) as admin:
        code, message = admin.unregister_broker(7)
    assert code == ErrorCode.BROKER_ID_NOT_REGISTERED and message == "Broker ID 7 is not currently registered"


def test_removing_the_only_in_sync_copy_is_refused(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    bs = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("single", num_partitions=1, replica_assignment=[[3]])])["single"].result(30)
    wait_for(lambda: ("single", 0) in state_of(bs).partitions, 30, "single in the metadata")
    cluster.stop_node(3)
    others = running(cluster)
    wait_for(lambda: 3 not in state(cluster).brokers, 20, "broker 3 fenced")
    r = pylog_cli("cluster", "remove-broker", "3", bootstrap=others)
    assert r.returncode == 1 and "single-0: its only in-sync replica (3)" in r.stderr, r.stderr
    assert state(cluster).partitions[("single", 0)].replicas == (3,)


def test_a_new_topic_uses_a_new_broker_and_racks(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3, racks=["r1", "r1", "r2"])
    new = cluster.add_node(rack="r2")
    create(cluster.bootstrap_servers, "fresh", 8, 2)
    s = state(cluster)
    racks = s.racks()
    assert racks == {1: "r1", 2: "r1", 3: "r2", new: "r2"}
    used = {b for p in range(8) for b in s.partitions[("fresh", p)].replicas}
    assert new in used
    for p in range(8):
        assert len({racks[b] for b in s.partitions[("fresh", p)].replicas}) == 2
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = kp.describe_cluster()
        assert {b["broker_id"]: b["rack"] for b in described["brokers"]} == racks
    finally:
        kp.close()


# ---------------------------------------------------------------------------------------------
# moves under load, checked


def test_a_twelve_partitions_move_from_three_brokers_to_four(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create(cluster.bootstrap_servers)
    history, workload, group = load(cluster)
    new = cluster.add_node()
    r = pylog_cli("cluster", "rebalance", "--execute", bootstrap=running(cluster))
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    finish(cluster, workload, history, group, "(a) 12 partitions from 3 brokers to 4")
    b = state(cluster).brokers[new]
    assert b.replicas >= 8 and b.leaders >= 2, b


def test_b_a_leader_killed_in_the_middle_of_a_move(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create(cluster.bootstrap_servers)
    history, workload, group = load(cluster)
    new = cluster.add_node()
    with ClusterAdminSync(running(cluster)) as admin:
        s = admin.state()
        # every partition moves one replica onto the new broker, the leader's where it can
        targets = {(TOPIC, p): tuple(new if b == s.partitions[(TOPIC, p)].leader else b
                                     for b in s.partitions[(TOPIC, p)].replicas) for p in range(PARTITIONS)}
        victim = s.partitions[(TOPIC, 0)].leader
        assert all(code == 0 for code, _ in admin.alter_reassignments(targets).values())
    cluster.kill(victim)  # -9 while the new replicas copy from it
    time.sleep(3)
    cluster.start_node(victim)
    settled(cluster, timeout_s=90)
    s = state(cluster)
    for tp, target in targets.items():
        assert s.partitions[tp].replicas == target, (tp, s.partitions[tp])
    finish(cluster, workload, history, group, f"(b) leader {victim} killed -9 mid-move")


def test_c_a_broker_removed_under_load(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    new = cluster.add_node()
    create(cluster.bootstrap_servers)
    assert any(new in p.replicas for p in state(cluster).partitions.values())
    history, workload, group = load(cluster)
    cluster.remove_node(new)
    s = state(cluster)
    assert new not in s.brokers and all(new not in p.replicas for p in s.partitions.values())
    finish(cluster, workload, history, group, f"(c) broker {new} removed under load")


# ---------------------------------------------------------------------------------------------
# the whole story


def test_acceptance_add_a_node_rebalance_then_remove_broker_one(cluster_factory: Any) -> None:
    cluster: LocalCluster = cluster_factory(3)
    create(cluster.bootstrap_servers)
    history, workload, group = load(cluster, rate=1000)  # two producers: about 2,000 records/s
    new = cluster.add_node()
    assert new == 4
    started = time.monotonic()
    r = pylog_cli("cluster", "rebalance", "--execute", bootstrap=running(cluster))
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout, f"rebalance took {time.monotonic() - started:.1f}s")
    settled(cluster)
    b4 = state(cluster).brokers[4]
    assert b4.replicas >= 8 and b4.leaders >= 2, b4
    # remove-broker 1: it moves everything off, then waits for node 1 to stop before unregistering
    exe = Path(sys.executable).with_name("pylog")
    env = dict(os.environ, PYLOG_BOOTSTRAP_SERVERS=running(cluster))
    proc = subprocess.Popen([str(exe), "cluster", "remove-broker", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=lambda: [*map(lines.put, proc.stdout), lines.put(None)], daemon=True)
    reader.start()
    out: list[str] = []
    deadline = time.monotonic() + 300
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            raise AssertionError(f"remove-broker 1 did not finish in 300 s; {stuck(cluster)}\n"
                                 + "".join(out[-12:])) from None
        if line is None:
            break
        out.append(line)
        if "stop it" in line:
            cluster.stop_node(1)
            cluster.node(1).removed = True
    assert proc.wait(30) == 0, "".join(out)
    print("".join(out))
    s = state(cluster)
    assert sorted(s.brokers) == [2, 3, 4]
    assert all(1 not in p.replicas for p in s.partitions.values())
    finish(cluster, workload, history, group, "acceptance: +node 4, rebalance, remove-broker 1")
