"""The new group protocols against their baselines, in one run, on pylog (and Tansu where it can).

* time to first record of a fresh single-member group on a 4-partition topic (records already
  there), from ``subscribe()`` to the first record ``poll`` returns: confluent-kafka with
  ``group.protocol=classic`` (the baseline, also run against Tansu) and ``group.protocol=consumer``
  (KIP-848); median (max) of ``--runs`` fresh groups.
* share-group throughput: ``--records`` records on a 1-partition topic drained by 1, 2 and 4
  confluent-kafka ``ShareConsumer``s (implicit acknowledgement, one thread each), records/s from the
  first subscribe to the last record; the baseline row is one classic consumer reading the same
  partition (``assign``, no group).

    python bench/bench_group_protocols.py
    python bench/bench_group_protocols.py --brokers pylog --runs 3 --records 20000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import BenchBroker, create_topic
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

DEADLINE_S = 120.0
CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 68, 76


def advertised(bootstrap: str) -> set[int]:
    """The API keys the broker advertises (one ApiVersions v0 round trip)."""
    import socket
    import struct

    from pylog.protocol.api import decode_response, encode_request

    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), 10) as s:
        s.sendall(encode_request(18, 0, 1, "bench", {}))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(size, socket.MSG_WAITALL)
    return {k.api_key for k in decode_response(18, 0, body)[1].api_keys}


def fill(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    create_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 1000})
    value = b"x" * 100
    for i in range(n):
        p.produce(topic, value=value, partition=i % partitions)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def first_record_s(bootstrap: str, topic: str, protocol: str) -> float:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"ttfr-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "group.protocol": protocol,
    }
    c = Consumer(conf)
    try:
        start = time.monotonic()
        c.subscribe([topic])
        while time.monotonic() - start < DEADLINE_S:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                return time.monotonic() - start
        raise TimeoutError("no record")
    finally:
        c.close()


def share_rate(bootstrap: str, topic: str, consumers: int, n: int) -> float:
    group = f"share-{uuid.uuid4().hex[:8]}"
    seen = [0] * consumers
    stop = threading.Event()

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            c.subscribe([topic])
            while not stop.is_set():
                seen[i] += sum(1 for m in c.poll(0.2) if m.error() is None)
                if sum(seen) >= n:
                    stop.set()
        finally:
            c.close()

    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    stop.wait(DEADLINE_S)
    elapsed = time.monotonic() - start
    stop.set()
    for t in threads:
        t.join(30)
    if sum(seen) < n:
        raise TimeoutError(f"{sum(seen)} of {n} records")
    return n / elapsed


def classic_rate(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        start = time.monotonic()
        c.assign([TopicPartition(topic, 0, 0)])
        got = 0
        while got < n and time.monotonic() - start < DEADLINE_S:
            got += sum(1 for m in c.consume(1000, 0.2) if m.error() is None)
        return got / (time.monotonic() - start)
    finally:
        c.close()


def fmt(samples: list[float], unit: str = "s") -> str:
    if unit == "rec/s":
        return f"{statistics.median(samples):,.0f}"
    if len(samples) == 1:
        return f"{samples[0]:.3f}"
    return f"{statistics.median(samples):.3f} ({max(samples):.3f})"


def measure(kind: str, runs: int, records: int) -> dict[str, str]:
    out: dict[str, str] = {}
    config = {"share.auto.offset.reset": "earliest"} if kind == "pylog" else {}
    b = BenchBroker(kind, config=config).start()
    try:
        apis = advertised(b.bootstrap)
        four = f"four-{uuid.uuid4().hex[:8]}"
        fill(b.bootstrap, four, 4, 1000)
        for protocol in ("classic", "consumer"):
            row = f"first record, group.protocol={protocol} (s)"
            if protocol == "consumer" and CONSUMER_GROUP_HEARTBEAT not in apis:
                out[row] = "not supported"
                continue
            try:
                out[row] = fmt([first_record_s(b.bootstrap, four, protocol) for _ in range(runs)])
            except Exception as exc:
                out[row] = f"n/a ({type(exc).__name__})"
        one = f"one-{uuid.uuid4().hex[:8]}"
        fill(b.bootstrap, one, 1, records)
        out["1 partition, classic consumer, assign (rec/s)"] = fmt(
            [classic_rate(b.bootstrap, one, records)], "rec/s"
        )
        for k in (1, 2, 4):
            row = f"1 partition, {k} ShareConsumer(s) (rec/s)"
            if SHARE_GROUP_HEARTBEAT not in apis:
                out[row] = "not supported"
                continue
            try:
                out[row] = fmt([share_rate(b.bootstrap, one, k, records)], "rec/s")
            except Exception as exc:
                out[row] = f"n/a ({type(exc).__name__})"
    finally:
        b.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="pylog,tansu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=20000)
    args = ap.parse_args()
    kinds = [k for k in args.brokers.split(",") if k]
    results = {}
    for k in kinds:
        try:
            results[k] = measure(k, args.runs, args.records)
        except Exception as exc:  # a peer that is not installed still leaves the others
            results[k] = {"error": f"{type(exc).__name__}: {exc}"[:40]}
    rows = list(dict.fromkeys(r for k in kinds for r in results[k]))
    width = max(len(r) for r in rows) + 2
    print(f"{'median (max) of ' + str(args.runs) + ' runs':<{width}}" + "".join(f"{k:>22}" for k in kinds))
    for r in rows:
        print(f"{r:<{width}}" + "".join(f"{results[k].get(r, '-'):>22}" for k in kinds))


if __name__ == "__main__":
    main()
