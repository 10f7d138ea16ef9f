"""Consumer-group start-up latency against pylog and Tansu, side by side in one run.

Two measurements per client (kafka-python and confluent-kafka, default settings except
``auto.offset.reset=earliest`` so that records already in the topic count):

* first record: a fresh single-member group; time from ``subscribe()`` (the consumer object
  already built) to the first record returned by ``poll``. The "cold" row is the first group
  ever on a fresh broker (pylog then also creates ``__consumer_offsets``); the "warm" rows are
  later groups on the same broker, median / max of ``--runs``.
* settle: three members of a fresh group subscribe together to a 6-partition topic; time until
  every member holds 2 partitions and together they hold all 6 (median / max of ``--runs``).

    python bench/bench_groups.py
    python bench/bench_groups.py --brokers pylog --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import BenchBroker, create_topic

CLIENTS = ("kafka-python", "confluent-kafka")
RECORDS = 10
TIMEOUT_S = 60.0


def fill(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS * partitions):
        p.produce(topic, b"v%d" % i, partition=i % partitions)
    if p.flush(30):
        raise RuntimeError("records were not acknowledged")


# ---------------------------------------------------------------------------- one consumer per client


class KafkaPythonMember:
    def __init__(self, bootstrap: str, group: str) -> None:
        from kafka import KafkaConsumer

        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest")

    def subscribe(self, topic: str) -> None:
        self.c.subscribe([topic])

    def poll(self) -> int:
        return sum(len(v) for v in self.c.poll(timeout_ms=100).values())

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


class ConfluentMember:
    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer

        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
        self.c = Consumer(conf)

    def subscribe(self, topic: str) -> None:
        self.c.subscribe([topic])

    def poll(self) -> int:
        m = self.c.poll(0.1)
        return 1 if m is not None and not m.error() else 0

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


MEMBERS: dict[str, Callable[[str, str], Any]] = {
    "kafka-python": KafkaPythonMember,
    "confluent-kafka": ConfluentMember,
}


def first_record_s(client: str, bootstrap: str, topic: str) -> float:
    m = MEMBERS[client](bootstrap, f"bench-{uuid.uuid4().hex[:10]}")
    try:
        t0 = time.perf_counter()
        m.subscribe(topic)
        while time.perf_counter() - t0 < TIMEOUT_S:
            if m.poll():
                return time.perf_counter() - t0
        raise RuntimeError(f"{client}: no record within {TIMEOUT_S}s")
    finally:
        m.close()


def settle_s(client: str, bootstrap: str, topic: str, partitions: int = 6, size: int = 3) -> float:
    group = f"bench-{uuid.uuid4().hex[:10]}"
    members = [MEMBERS[client](bootstrap, group) for _ in range(size)]
    # Each consumer is used by its own thread only (neither client is thread-safe per instance).
    seen: list[set[int]] = [set() for _ in members]
    stop = threading.Event()
    changed = threading.Condition()

    def run(i: int) -> None:
        m = members[i]
        m.subscribe(topic)
        while not stop.is_set():
            m.poll()
            now = m.assignment()
            if now != seen[i]:
                with changed:
                    seen[i] = now
                    changed.notify()

    def balanced() -> bool:
        flat = sorted(p for a in seen for p in a)
        return flat == list(range(partitions)) and all(len(a) == partitions // size for a in seen)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(size)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    try:
        with changed:
            if not changed.wait_for(balanced, TIMEOUT_S):
                raise RuntimeError(f"{client}: {size} members did not settle within {TIMEOUT_S}s")
            return time.perf_counter() - t0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for m in members:
            m.close()


# ---------------------------------------------------------------------------- table


def measure(kind: str, runs: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for client in CLIENTS:
        b = BenchBroker(kind).start()
        try:
            one, six = f"one-{uuid.uuid4().hex[:8]}", f"six-{uuid.uuid4().hex[:8]}"
            fill(b.bootstrap, one, 1)
            fill(b.bootstrap, six, 6)
            out[f"{client}: first record, cold"] = fmt([first_record_s(client, b.bootstrap, one)])
            out[f"{client}: first record, warm"] = fmt(
                [first_record_s(client, b.bootstrap, one) for _ in range(runs)]
            )
            settles = [settle_s(client, b.bootstrap, six) for _ in range(runs)]
            out[f"{client}: 3 members settle"] = fmt(settles)
        except Exception as exc:  # a broker that cannot do it still gets a row
            out.setdefault(f"{client}: error", str(exc)[:60])
        finally:
            b.stop()
    return out


def fmt(samples: list[float]) -> str:
    if len(samples) == 1:
        return f"{samples[0]:.3f}"
    return f"{statistics.median(samples):.3f} (max {max(samples):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="pylog,tansu")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    kinds = [k for k in args.brokers.split(",") if k]
    results = {k: measure(k, args.runs) for k in kinds}
    rows = list(dict.fromkeys(r for k in kinds for r in results[k]))
    width = max(len(r) for r in rows) + 2
    head = f"seconds (median (max) of {args.runs})"
    print(f"{head:<{width}}" + "".join(f"{k:>24}" for k in kinds))
    for r in rows:
        print(f"{r:<{width}}" + "".join(f"{results[k].get(r, '-'):>24}" for k in kinds))


if __name__ == "__main__":
    main()
