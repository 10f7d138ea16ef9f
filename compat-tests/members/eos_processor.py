"""One exactly-once stream processor in its own process: consume, transform, produce, and commit
the consumed offsets in the same transaction (confluent-kafka, read_committed, as Kafka Streams
does with processing.guarantee=exactly_once_v2).

    python eos_processor.py BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TRANSACTIONAL_ID TXN_TIMEOUT_MS

Every input record ``v`` becomes ``out:v`` on the same partition of OUT_TOPIC. Prints JSON lines:
{"event": "committed", "begun": t, "t": t, "n": records} per committed transaction (times are
time.monotonic(), comparable across processes on one machine), {"event": "aborted", ...} and
{"event": "error", ...} when a transaction fails, {"event": "stopped"} after SIGTERM.
An abortable error aborts and rewinds the consumer to the group's committed offsets; a fatal one
(a fenced producer) starts a new producer, which fences the old one, as Kafka Streams does.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

stop = threading.Event()
# Kafka Streams runs the Java client. Two librdkafka defaults would make this process slower to
# find coordinators that moved than Streams is (against Kafka as against pylog):
# * reconnect.backoff.max.ms: a dead transaction coordinator is retried, and only then looked up
#   again, after up to 10 s; the Java client waits 1 s at most.
# * metadata.max.age.ms: a group coordinator stays in librdkafka's coordinator cache this long,
#   and a TxnOffsetCommit waiting for a dead one is looked at again only when some broker
#   connection changes state; 5 s drops a dead coordinator before its successor is up.
CLIENT = {"reconnect.backoff.max.ms": 1000, "metadata.max.age.ms": 5000}
# librdkafka debug contexts for both clients (stderr), e.g. PYLOG_EOS_DEBUG=eos,cgrp,protocol
DEBUG = {"debug": os.environ["PYLOG_EOS_DEBUG"]} if os.environ.get("PYLOG_EOS_DEBUG") else {}
BATCH = 50
OP_TIMEOUT_S = 60


def say(**event: object) -> None:
    print(json.dumps(event), flush=True)


def new_producer(bootstrap: str, txn_id: str, txn_timeout_ms: int) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": txn_timeout_ms,
            "linger.ms": 5,
            **CLIENT,
            **DEBUG,
        }
    )
    while True:
        try:
            p.init_transactions(OP_TIMEOUT_S)
            return p
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            say(event="error", op="init_transactions", error=str(exc.args[0]))


def rewind(c: Consumer) -> None:
    """Back to the group's committed offsets: the aborted records are processed again."""
    assignment = c.assignment()
    if not assignment:
        return
    for tp in c.committed(assignment, timeout=OP_TIMEOUT_S):
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        c.seek(TopicPartition(tp.topic, tp.partition, offset))


def poll_batch(c: Consumer) -> list[Any]:
    msgs: list[Any] = []
    deadline = time.monotonic() + 0.2
    while len(msgs) < BATCH and time.monotonic() < deadline and not stop.is_set():
        m = c.poll(0.05)
        if m is None:
            continue
        if m.error():
            if m.error().fatal():
                raise KafkaException(m.error())
            continue
        msgs.append(m)
    return msgs


def transact(p: Producer, c: Consumer, out_topic: str, msgs: list[Any]) -> dict[str, float]:
    """Run one transaction; when each step ended (produced, offsets sent)."""
    p.begin_transaction()
    offsets: dict[tuple[str, int], int] = {}
    for m in msgs:
        p.produce(out_topic, value=b"out:" + m.value(), partition=m.partition())
        offsets[(m.topic(), m.partition())] = m.offset() + 1
    tps = [TopicPartition(t, part, o) for (t, part), o in offsets.items()]
    steps = {"produced": time.monotonic()}
    while True:
        try:
            p.send_offsets_to_transaction(tps, c.consumer_group_metadata(), OP_TIMEOUT_S)
            break
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            say(event="error", op="send_offsets", error=str(exc.args[0]))
    steps["offsets"] = time.monotonic()
    while True:
        try:
            p.commit_transaction(OP_TIMEOUT_S)
            return steps
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            say(event="error", op="commit", error=str(exc.args[0]))


def abort(p: Producer) -> bool:
    """Abort the current transaction; False if the producer failed for good (fenced, or the
    coordinator has no such transaction): a new one takes over."""
    while True:
        try:
            p.abort_transaction(OP_TIMEOUT_S)
            return True
        except KafkaException as exc:
            err = exc.args[0]
            say(event="error", op="abort", error=str(err), fatal=err.fatal(), t=time.monotonic())
            if not err.retriable():
                return False


def main() -> None:
    bootstrap, in_topic, out_topic, group, txn_id, txn_timeout = sys.argv[1:7]
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 45000,
            "heartbeat.interval.ms": 3000,
            **CLIENT,
            **DEBUG,
        }
    )
    c.subscribe([in_topic])
    p = new_producer(bootstrap, txn_id, int(txn_timeout))
    say(event="ready")
    parent = os.getppid()
    try:
        while not stop.is_set() and os.getppid() == parent:  # the test went away: stop too
            msgs = poll_batch(c)
            if not msgs:
                continue
            begun = time.monotonic()
            try:
                steps = transact(p, c, out_topic, msgs)
                say(event="committed", begun=begun, t=time.monotonic(), n=len(msgs), **steps)
            except KafkaException as exc:
                err = exc.args[0]
                say(event="error", op="transaction", error=str(err), fatal=err.fatal(), t=time.monotonic())
                if err.txn_requires_abort() and abort(p):
                    say(event="aborted", begun=begun, t=time.monotonic())
                else:
                    p = new_producer(bootstrap, txn_id, int(txn_timeout))
                    say(event="new_producer", t=time.monotonic())
                rewind(c)
    finally:
        c.close()
        say(event="stopped")


if __name__ == "__main__":
    main()
