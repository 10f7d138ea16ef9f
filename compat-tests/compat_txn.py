"""Helpers for the transaction compatibility tests: what read_committed and read_uncommitted
consumers (confluent-kafka) see, up to an end sentinel written after the scenario."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

END = b"__end__"
TXN_JS = Path(__file__).parent / "js" / "kafkajs_txn.js"


def write_end(bootstrap: str, topic: str, partitions: Sequence[int]) -> None:
    """A plain (non-transactional) sentinel record at the end of each partition."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for part in partitions:
        p.produce(topic, value=END, partition=part)
    assert p.flush(30) == 0


def read_to_end(
    bootstrap: str,
    topic: str,
    partitions: Sequence[int],
    *,
    committed: bool,
    timeout: float = 40.0,
    ends: int = 1,
) -> dict[int, list[bytes]]:
    """Values per partition, in offset order, up to the `ends`-th end sentinel (sentinels left out)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    out: dict[int, list[bytes]] = {p: [] for p in partitions}
    done: set[int] = set()
    seen = dict.fromkeys(partitions, 0)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(done) < len(partitions) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().fatal() or not m.error().retriable():
                    raise KafkaException(m.error())
                continue
            if m.partition() in done:
                continue
            if m.value() == END:
                seen[m.partition()] += 1
                if seen[m.partition()] == ends:
                    done.add(m.partition())
            else:
                out[m.partition()].append(m.value())
    finally:
        c.close()
    missing = sorted(set(partitions) - done)
    assert not missing, f"no end sentinel read from partitions {missing} of {topic} in {timeout}s: {out}"
    return out


def kafkajs_txn(args: dict[str, Any], timeout: float = 90.0) -> dict[str, Any]:
    out = subprocess.run(
        ["node", str(TXN_JS), "-"],
        input=json.dumps(args).encode(),
        capture_output=True,
        timeout=timeout,
        cwd=TXN_JS.parent,
        check=False,
    )
    lines = out.stdout.decode().strip().splitlines()
    doc = json.loads(lines[-1]) if lines else {}
    if out.returncode != 0 or "error" in doc:
        stderr = out.stderr.decode(errors="replace")[-4000:]
        raise AssertionError(f"kafkajs_txn failed: {doc}\nstderr: {stderr}")
    return doc


def confluent_txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra}
    p = Producer(conf)
    p.init_transactions(30)
    return p
