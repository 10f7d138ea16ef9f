"""One consumer-group member in its own process, so that a test can SIGTERM it (clean leave) or
SIGKILL it (vanish without LeaveGroup).

    python group_member.py CLIENT BOOTSTRAP TOPIC GROUP [SESSION_TIMEOUT_MS]

CLIENT is kafka-python, confluent-kafka or aiokafka. Prints a JSON line
{"event": "assigned", "partitions": [...]} whenever its assignment changes, and
{"event": "stopped"} after leaving the group on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading

stop = threading.Event()


def say(**event: object) -> None:
    print(json.dumps(event), flush=True)


def run_kafka_python(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=1000,
        auto_offset_reset="earliest",
    )
    last = None
    try:
        while not stop.is_set():
            c.poll(timeout_ms=200)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                last = now
                say(event="assigned", partitions=now)
    finally:
        c.close()


def run_confluent(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": 1000,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    last = None
    try:
        while not stop.is_set():
            c.poll(0.2)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                last = now
                say(event="assigned", partitions=now)
    finally:
        c.close()


async def run_aiokafka(bootstrap: str, topic: str, group: str, session_ms: int) -> None:
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=1000,
        auto_offset_reset="earliest",
    )
    await c.start()
    last = None
    try:
        while not stop.is_set():
            await c.getmany(timeout_ms=200)
            now = sorted(tp.partition for tp in c.assignment())
            if now != last:
                last = now
                say(event="assigned", partitions=now)
    finally:
        await c.stop()


def main() -> None:
    client, bootstrap, topic, group = sys.argv[1:5]
    session_ms = int(sys.argv[5]) if len(sys.argv) > 5 else 6000
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if client == "kafka-python":
        run_kafka_python(bootstrap, topic, group, session_ms)
    elif client == "confluent-kafka":
        run_confluent(bootstrap, topic, group, session_ms)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(bootstrap, topic, group, session_ms))
    else:
        raise SystemExit(f"unknown client {client}")
    say(event="stopped")


if __name__ == "__main__":
    main()
