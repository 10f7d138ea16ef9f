"""Exactly-once stream processing across the loss of the node that is at once the active
controller, the group coordinator and the transaction coordinator (kill -9), on a 3-node cluster
with Kafka's default timeouts (``broker.session.timeout.ms`` 9 s, ``replica.lag.time.max.ms``
30 s).

Two processor processes (members/eos_processor.py: confluent-kafka, read_committed, offsets sent
to the transaction, as Kafka Streams with exactly_once_v2) turn every record ``v`` of the input
topic into ``out:v`` while an idempotent producer keeps feeding the input. The group id and the
transactional ids are chosen so their coordinator is the active controller; that node is killed.
Recovery is the time from the kill to the first commit of a transaction begun after it, for each
processor: it must come within the session timeout plus a few seconds (15 s). Afterwards the
output, read_committed, holds every input record's transformed record exactly once, in order.

Each run draws its plan from a seed (printed): the number of partitions, when the kill falls,
the transaction timeout, whether the killed node comes back. The suite runs a few seeds;
``PYLOG_TXN_FAILOVER_RUNS=N`` runs seeds 1..N, ``PYLOG_TXN_FAILOVER_SEEDS=a,b,..`` those seeds.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kp_wire
import pytest
from cluster_support import wait_for
from compat_txn import read_to_end, write_end
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest

from pylog.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(180)

PROCESSOR_PY = Path(__file__).parent / "members" / "eos_processor.py"
RECOVERY_BOUND_S = 15.0  # broker.session.timeout.ms (9 s) plus a few seconds
STALL_LIMIT_S = 60.0  # how long a stalled run is watched before it counts as not recovered
GROUP_KEY, TXN_KEY = 0, 1

# Kafka's defaults for everything failure detection depends on (cluster_factory's FAST settings
# are put back), and no initial rebalance delay so the processors start at once.
KAFKA_TIMINGS = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "controller.quorum.election.timeout.ms": "1000",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.backoff.ms": "1000",
    "log.flush.interval.messages": str(2**63 - 1),
    "group.initial.rebalance.delay.ms": "0",
}


def _seeds() -> list[int]:
    explicit = os.environ.get("PYLOG_TXN_FAILOVER_SEEDS")
    if explicit:
        return [int(s) for s in explicit.split(",") if s.strip()]
    return list(range(1, int(os.environ.get("PYLOG_TXN_FAILOVER_RUNS", "2")) + 1))


@dataclass(frozen=True)
class Plan:
    seed: int
    partitions: int
    warmup_s: float  # processing before the kill
    txn_timeout_ms: int
    restart_victim: bool
    rate: float  # input records per second

    @classmethod
    def draw(cls, seed: int) -> Plan:
        rng = random.Random(seed)
        return cls(
            seed=seed,
            partitions=rng.choice((3, 4, 6)),
            warmup_s=rng.uniform(1.0, 4.0),
            txn_timeout_ms=rng.choice((10000, 60000)),  # Kafka Streams' EOS default, librdkafka's
            restart_victim=rng.random() < 0.5,
            rate=rng.choice((100.0, 200.0)),
        )


# ---------------------------------------------------------------------------------------------
# the processes


@dataclass
class Processor:
    """One eos_processor.py process and the events it printed."""

    name: str
    proc: subprocess.Popen[bytes]
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, name: str, args: list[str], stderr: Path) -> Processor:
        with stderr.open("wb") as err:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                [sys.executable, str(PROCESSOR_PY), *args],
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        p = cls(name, proc)
        threading.Thread(target=p._read, daemon=True).start()
        return p

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def commits(self) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e.get("event") == "committed"]

    def recovered_at(self, t_kill: float) -> float | None:
        """When the first transaction begun after ``t_kill`` committed."""
        return next((e["t"] for e in self.commits() if e["begun"] > t_kill), None)

    def around(self, t_kill: float) -> list[str]:
        """What happened from the last commit before the kill to the first commit of a transaction
        begun after it, times relative to the kill."""
        with self.lock:
            events = list(self.events)
        first = max((i for i, e in enumerate(events) if e.get("t", t_kill + 1) <= t_kill), default=0)
        out = []
        for e in events[first:]:
            times = " ".join(f"{k}={v - t_kill:+.1f}" for k, v in e.items() if isinstance(v, float))
            detail = e.get("error", "")[:120]
            out.append(f"{e['event']} {times} {detail}".strip())
            if e.get("event") == "committed" and e["begun"] > t_kill:
                break
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class Feeder:
    """An idempotent acks=all producer writing ``in-<n>`` to partition n % partitions, paced."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def _run(self) -> None:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
            }
        )

        def cb(err: Any, _msg: Any) -> None:
            if err is not None:
                self.failed.append(str(err))

        t0 = time.monotonic()
        while not self._stop.is_set():
            n = self.sent
            try:
                p.produce(self.topic, f"in-{n}".encode(), partition=n % self.partitions, on_delivery=cb)
            except BufferError:
                p.poll(0.1)
                continue
            self.sent += 1
            p.poll(0)
            ahead = self.sent / self.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        left = p.flush(120)
        if left:
            self.failed.append(f"{left} records unacknowledged after 120 s")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        assert not self._thread.is_alive(), "the input producer did not finish"
        assert not self.failed, f"input records failed: {self.failed[:5]}"


# ---------------------------------------------------------------------------------------------
# placement


def coordinators(address: str, key_type: int, keys: list[str]) -> dict[str, int]:
    """FindCoordinator (v4, batched) for ``keys``: key -> node id, for those answered."""
    resp = kp_wire.call(address, FindCoordinatorRequest, 4, key_type=key_type, coordinator_keys=keys)
    return {c.key: c.node_id for c in resp.coordinators if c.error_code == 0}


def java_hash_partition(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (ASCII keys)."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: part.leader for p, part in md.topics[topic].partitions.items()}


def ids_coordinated_by(address: str, node: int, key_type: int, prefix: str, count: int) -> list[str]:
    """``count`` ids ``prefix-<k>`` whose coordinator is ``node``, as FindCoordinator answers and
    as the leaders of the internal topic's partitions say (the first lookup creates the topic)."""
    topic = "__consumer_offsets" if key_type == GROUP_KEY else "__transaction_state"

    def found() -> list[str] | None:
        candidates = [f"{prefix}-{k}" for k in range(60)]
        answered = coordinators(address, key_type, candidates)
        led = leaders(address, topic)
        if len(answered) < len(candidates) or any(n < 0 for n in led.values()):
            return None
        mine = [k for k, n in answered.items() if n == node and led[java_hash_partition(k, len(led))] == node]
        return mine[:count] if len(mine) >= count else None

    return wait_for(found, 60, f"{count} {topic} keys coordinated by node {node}", interval_s=0.5)


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(n, partitions, 3, config={"min.insync.replicas": "2"}) for n in names]
    for f in admin.create_topics(new, request_timeout=30).values():
        f.result(30)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-failover-ends"})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", _seeds())
def test_processing_recovers_after_the_controller_and_coordinator_is_killed(
    seed: int, cluster_factory: Any, tmp_path: Path
) -> None:
    plan = Plan.draw(seed)
    print(f"\ntxn-failover plan: {plan}")
    cluster: LocalCluster = cluster_factory(3, KAFKA_TIMINGS)
    bs = cluster.bootstrap_servers
    src, dst = "eos-in", "eos-out"
    create_topics(bs, [src, dst], plan.partitions)
    victim = cluster.controller_id()
    address = cluster.node(victim).bootstrap
    (group,) = ids_coordinated_by(address, victim, GROUP_KEY, f"eos-group-{seed}", 1)
    txn_ids = ids_coordinated_by(address, victim, TXN_KEY, f"eos-txn-{seed}", 2)

    feeder = Feeder(bs, src, plan.partitions, plan.rate).start()
    procs = [
        Processor.start(
            txn_id, [bs, src, dst, group, txn_id, str(plan.txn_timeout_ms)], tmp_path / f"{txn_id}.stderr"
        )
        for txn_id in txn_ids
    ]
    outcome = "stalled before the kill"
    t_kill = float("inf")
    try:
        wait_for(lambda: all(len(p.commits()) >= 3 for p in procs), 60, "both processors committing")
        time.sleep(plan.warmup_s)
        assert cluster.controller_id() == victim, "the active controller moved before the kill"
        t_kill = time.monotonic()
        cluster.kill(victim)
        print(f"killed node {victim} at {time.strftime('%H:%M:%S')}")
        deadline = t_kill + STALL_LIMIT_S
        while time.monotonic() < deadline and not all(p.recovered_at(t_kill) for p in procs):
            time.sleep(0.2)
        recovery = {p.name: p.recovered_at(t_kill) for p in procs}
        outcome = " ".join(f"{'stalled' if t is None else f'{t - t_kill:5.1f}s'}" for t in recovery.values())
        if plan.restart_victim:
            cluster.start_node(victim)
        feeder.stop()
        ends = end_offsets(bs, src, plan.partitions)
        wait_for(
            lambda: committed_offsets(bs, group, src, plan.partitions) == ends,
            60,
            f"the group's committed offsets at the input's end {ends}",
            interval_s=1.0,
        )
    finally:
        for p in procs:
            p.stop()
        print(
            f"txn-failover | seed {seed:3d} | victim {victim} | partitions {plan.partitions} "
            f"| txn timeout {plan.txn_timeout_ms // 1000:2d}s | recovery {outcome}"
        )
        for p in procs:
            print(f"  {p.name}: {p.around(t_kill)}")

    write_end(bs, src, range(plan.partitions))
    write_end(bs, dst, range(plan.partitions))
    inputs = read_to_end(bs, src, range(plan.partitions), committed=False, timeout=60)
    outputs = read_to_end(bs, dst, range(plan.partitions), committed=True, timeout=60)
    assert sum(len(v) for v in inputs.values()) == feeder.sent
    for part in range(plan.partitions):
        want = [b"out:" + v for v in inputs[part]]
        got = outputs[part]
        missing = len(set(want) - set(got))
        dups = len(got) - len(set(got))
        assert got == want, f"partition {part}: {missing} missing, {dups} duplicated ({len(got)}/{len(want)})"
    slow = {n: t for n, t in recovery.items() if t is None or t - t_kill > RECOVERY_BOUND_S}
    assert not slow, f"seed {seed}: processing did not recover within {RECOVERY_BOUND_S}s: {outcome}"


TXNS = 25


def test_markers_to_other_leaders_leave_the_coordinators_fetches_alone(cluster_factory: Any) -> None:
    """Commits whose markers go to partitions led by other brokers, while the coordinator's broker
    follows those partitions: every commit completes and no live follower leaves an ISR. (A
    WriteTxnMarkers waits for the followers to fetch the marker; had it shared its connection with
    the coordinator broker's replica fetches, their answers would queue behind it and the leader
    would drop the live follower once ``replica.lag.time.max.ms``, 4 s here, passed.)"""
    cluster: LocalCluster = cluster_factory(3)
    bs = cluster.bootstrap_servers
    create_topics(bs, ["txn-isr"], 3)
    wait_for(lambda: all(n >= 0 for n in leaders(bs, "txn-isr").values()), 20, "leaders for txn-isr")
    coordinator = cluster.controller_id()
    (txn_id,) = ids_coordinated_by(cluster.node(coordinator).bootstrap, coordinator, TXN_KEY, "isr", 1)
    remote = [p for p, n in leaders(bs, "txn-isr").items() if n != coordinator]
    assert remote, "every partition is led by the coordinator's broker"
    # Plain records keep the followers' fetches coming back, so markers often arrive between two
    # of them (with no fetch waiting at the leader for the marker to answer at once).
    feeder = Feeder(bs, "txn-isr-busy", 3, 500.0)
    create_topics(bs, ["txn-isr-busy"], 3)
    feeder.start()
    p = Producer({"bootstrap.servers": bs, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(30)
    deadline = time.monotonic() + 60
    try:
        for k in range(TXNS):
            assert time.monotonic() < deadline, f"only {k} of {TXNS} transactions committed in 60 s"
            p.begin_transaction()
            for part in range(3):
                p.produce("txn-isr", f"{k}-{part}".encode(), partition=part)
            p.commit_transaction(30)
    finally:
        feeder.stop()
    md = AdminClient({"bootstrap.servers": bs}).list_topics("txn-isr", timeout=10)
    isrs = {q: sorted(part.isrs) for q, part in md.topics["txn-isr"].partitions.items()}
    assert all(isr == [1, 2, 3] for isr in isrs.values()), f"a live follower left an ISR: {isrs}"
    write_end(bs, "txn-isr", (0, 1, 2))
    got = read_to_end(bs, "txn-isr", (0, 1, 2), committed=True)
    assert got == {part: [f"{k}-{part}".encode() for k in range(TXNS)] for part in range(3)}
