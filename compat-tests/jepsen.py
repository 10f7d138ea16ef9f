"""A Jepsen-style history checker for a replicated log, and the workload that makes the history.

The history records every send with its acknowledgement (offset) or failure, and every record
read back. The checker reports what Kafka promises not to happen with acks=all, idempotent
producers and min.insync.replicas below the replication factor:

* lost: an acknowledged record that is not in the log;
* duplicated: a value in the log more than once (an idempotent retry written twice);
* reordered: one producer's values out of send order within a partition;
* misplaced: an acknowledged offset that holds something else;
* non-monotonic: a consumer session whose offsets in a partition went backwards.

The workload (`Workload`) runs real producers (confluent-kafka and kafka-python, idempotent,
acks=all) in threads, each sending numbered values round-robin to the partitions, while the
caller injects faults; `read_all` then reads every partition to its end with a fresh consumer.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class History:
    # producer -> seq -> (partition, offset or None if not acknowledged)
    sends: dict[str, dict[int, tuple[int, int | None]]] = field(default_factory=lambda: defaultdict(dict))
    failures: dict[str, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    # partition -> [(offset, value)] as read back, in offset order
    log: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    # (consumer session, partition) -> offsets in the order the session received them
    sessions: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked(self, producer: str, seq: int, partition: int, offset: int | None) -> None:
        with self.lock:
            self.sends[producer][seq] = (partition, offset)

    def failed(self, producer: str, seq: int, partition: int, error: str) -> None:
        with self.lock:
            self.failures[producer][seq] = error
            self.sends[producer].setdefault(seq, (partition, None))

    @property
    def acknowledged(self) -> int:
        return sum(1 for sends in self.sends.values() for _, o in sends.values() if o is not None)


@dataclass
class Report:
    acknowledged: int
    read: int
    lost: list[str]
    duplicated: list[str]
    reordered: list[str]
    misplaced: list[str]
    non_monotonic: list[str]
    failed_sends: int

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.misplaced or self.non_monotonic)

    def __str__(self) -> str:
        def few(xs: list[str]) -> str:
            return f"{len(xs)} {xs[:5]}" if xs else "0"

        return (
            f"acknowledged {self.acknowledged}, read {self.read}, failed sends {self.failed_sends}; "
            f"lost {few(self.lost)}, duplicated {few(self.duplicated)}, reordered {few(self.reordered)}, "
            f"misplaced {few(self.misplaced)}, non-monotonic {few(self.non_monotonic)}"
        )


def value(producer: str, seq: int) -> bytes:
    return f"{producer}:{seq}".encode()


def parse(v: bytes) -> tuple[str, int] | None:
    name, sep, seq = v.decode(errors="replace").rpartition(":")
    return (name, int(seq)) if sep and seq.isdigit() else None


def check(h: History) -> Report:
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    read = 0
    for partition, records in h.log.items():
        for offset, v in records:
            where[v].append((partition, offset))
            read += 1
    lost, misplaced = [], []
    for producer, sends in h.sends.items():
        for seq, (partition, offset) in sends.items():
            if offset is None:
                continue
            got = where.get(value(producer, seq), [])
            if not got:
                lost.append(f"{producer}:{seq}@{partition}/{offset}")
            elif (partition, offset) not in got:
                misplaced.append(f"{producer}:{seq} acked at {partition}/{offset}, found at {got}")
    duplicated = [f"{v.decode()} at {w}" for v, w in where.items() if len(w) > 1]
    reordered = []
    for partition, records in h.log.items():
        last: dict[str, int] = {}
        for offset, v in records:
            pv = parse(v)
            if pv is None:
                continue
            name, seq = pv
            if seq < last.get(name, -1):
                reordered.append(f"{name}:{seq} after {name}:{last[name]} in {partition} at {offset}")
            last[name] = max(seq, last.get(name, -1))
    non_monotonic = [
        f"{session} partition {p}: {a} after {b}"
        for (session, p), offsets in h.sessions.items()
        for b, a in itertools.pairwise(offsets)
        if a <= b
    ]
    failed = sum(len(f) for f in h.failures.values())
    return Report(h.acknowledged, read, lost, duplicated, reordered, misplaced, non_monotonic, failed)


# ---------------------------------------------------------------------------------------------
# the workload


class Workload:
    """Idempotent acks=all producers sending numbered values round-robin over ``partitions``."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, history: History, *, rate: float = 1500
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.rate = rate
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, producers: tuple[str, ...] = ("confluent-kafka", "kafka-python")) -> Workload:
        for name in producers:
            target = {"confluent-kafka": self._confluent, "kafka-python": self._kafka_python}[name]
            t = threading.Thread(
                target=self._guard, args=(target, name), name=f"workload-{name}", daemon=True
            )
            t.start()
            self._threads.append(t)
        return self

    def _guard(self, target: Any, name: str) -> None:
        try:
            target(name)
        except BaseException as exc:  # recorded; the test fails on it
            self.errors.append(exc)

    def cancel(self) -> None:
        """Tell the producers to end, without waiting or checking (a failed test's clean-up)."""
        self._stop.set()

    def stop(self, drain_s: float = 90.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(drain_s)
        if any(t.is_alive() for t in self._threads):
            raise AssertionError("a producer did not finish sending in time")
        if self.errors:
            raise AssertionError(f"the workload failed: {self.errors[0]!r}") from self.errors[0]

    def _pace(self, seq: int, t0: float) -> None:
        ahead = seq / self.rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)

    def _confluent(self, name: str) -> None:
        from confluent_kafka import Producer

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 100,
            }
        )
        seq, t0 = 0, time.monotonic()
        while not self._stop.is_set():
            partition = seq % self.partitions

            def cb(err: Any, msg: Any, seq: int = seq, partition: int = partition) -> None:
                if err is None:
                    self.history.acked(name, seq, partition, msg.offset())
                else:
                    self.history.failed(name, seq, partition, str(err))

            try:
                p.produce(self.topic, value(name, seq), partition=partition, on_delivery=cb)
            except BufferError:
                p.poll(0.1)
                continue
            seq += 1
            p.poll(0)
            self._pace(seq, t0)
        left = p.flush(90)
        if left:
            raise AssertionError(f"{name}: {left} records still unacknowledged after 90 s")

    def _kafka_python(self, name: str) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            retries=2**31 - 1,
            retry_backoff_ms=100,
            request_timeout_ms=15000,
            delivery_timeout_ms=120000,
        )
        seq, t0 = 0, time.monotonic()
        while not self._stop.is_set():
            partition = seq % self.partitions
            fut = p.send(self.topic, value(name, seq), partition=partition)
            fut.add_callback(
                lambda md, seq=seq, partition=partition: self.history.acked(name, seq, partition, md.offset)
            )
            fut.add_errback(
                lambda exc, seq=seq, partition=partition: self.history.failed(name, seq, partition, repr(exc))
            )
            seq += 1
            self._pace(seq, t0)
        p.flush(90)
        p.close(10)


def read_all(bootstrap: str, topic: str, partitions: int, history: History, timeout_s: float = 60.0) -> None:
    """Read every partition from its start to its end (as ListOffsets latest says) into the history."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"jepsen-reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        logs: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        done = {p for p, hi in ends.items() if hi == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191 and m.offset() >= ends[m.partition()]:  # _PARTITION_EOF
                    done.add(m.partition())
                continue
            logs[m.partition()].append((m.offset(), m.value()))
            history.sessions[("reader", m.partition())].append(m.offset())
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
        if len(done) < partitions:
            raise AssertionError(f"read only partitions {sorted(done)} to their end in {timeout_s}s")
        history.log = logs
    finally:
        c.close()
