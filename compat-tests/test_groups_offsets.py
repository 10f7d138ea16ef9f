"""Committed offsets: a consumer that commits, stops and restarts resumes after the last commit
(each client); commits survive broker restarts; two groups on one topic are independent."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, create_topic, kafkajs, kafkajs_rec, produce, run_cmd, unique

N = 10
FIRST = 4  # the first run reads and commits this many
pytestmark = pytest.mark.timeout(150)


def fill(bootstrap: str, topic: str, partitions: int = 1) -> None:
    create_topic(bootstrap, topic, partitions=partitions)
    recs = [Rec(f"v{i}".encode(), partition=i % partitions) for i in range(N * partitions)]
    produce("confluent-kafka", bootstrap, topic, recs)


# --- one "run" of a group consumer per client: read `count` records, commit, close -----------------


def kafka_python_run(bootstrap: str, topic: str, group: str, count: int) -> list[int]:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    got: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500, max_records=count - len(got)).values():
                got += [m.offset for m in msgs]
        if got:
            c.commit({TopicPartition(topic, 0): OffsetAndMetadata(max(got) + 1, "", -1)})
    finally:
        c.close()
    return got


def confluent_run(bootstrap: str, topic: str, group: str, count: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    c.subscribe([topic])
    got: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.offset())
        if got:
            c.commit(offsets=[TopicPartition(topic, 0, max(got) + 1)], asynchronous=False)
            assert c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset == max(got) + 1
    finally:
        c.close()
    return got


def aiokafka_run(bootstrap: str, topic: str, group: str, count: int) -> list[int]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> list[int]:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        await asyncio.wait_for(c.start(), 60)
        got: list[int] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < count and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=500, max_records=count - len(got))).values():
                    got += [m.offset for m in msgs]
            if got:
                await c.commit({TopicPartition(topic, 0): max(got) + 1})
        finally:
            await c.stop()
        return got

    return asyncio.run(go())


def kafkajs_run(bootstrap: str, topic: str, group: str, count: int) -> list[int]:
    out = kafkajs(
        "consume",
        {
            "brokers": [bootstrap],
            "topic": topic,
            "groupId": group,
            "count": count,
            "timeoutMs": 60000,
            "commit": True,
        },
        timeout=90,
    )
    return [kafkajs_rec(m).offset or 0 for m in out["messages"]]


def kcat_run(bootstrap: str, topic: str, group: str, count: int) -> list[int]:
    """kcat -G: librdkafka's balanced consumer; offsets are auto-committed on close."""
    out = run_cmd(
        [
            "kcat",
            "-b",
            bootstrap,
            "-G",
            group,
            "-c",
            str(count),
            "-f",
            "%o\n",
            "-X",
            "auto.offset.reset=earliest",
            topic,
        ],
        timeout=90,
    )
    return [int(x) for x in re.findall(rb"^(\d+)$", out.stdout, re.M)]


RUNS = {
    "kafka-python": kafka_python_run,
    "confluent-kafka": confluent_run,
    "aiokafka": aiokafka_run,
    "kafkajs": kafkajs_run,
    "kcat": kcat_run,
}


def committed(bootstrap: str, group: str, topic: str, partitions: int = 1) -> dict[int, int | None]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        res = admin.list_group_offsets({group: None}).get(group, {})
    finally:
        admin.close()
    out: dict[int, int | None] = {p: None for p in range(partitions)}
    for tp, om in res.items():
        if tp.topic == topic and om.offset >= 0:
            out[tp.partition] = om.offset
    return out


@pytest.mark.parametrize("client", list(RUNS))
def test_resume_after_commit(
    broker: BrokerProcess, topic_name: str, client: str, request: pytest.FixtureRequest
) -> None:
    if client in ("kcat", "kafkajs"):
        request.getfixturevalue(client)
    fill(broker.bootstrap, topic_name)
    group = unique(f"resume-{client}")
    run = RUNS[client]
    assert run(broker.bootstrap, topic_name, group, FIRST) == list(range(FIRST))
    assert committed(broker.bootstrap, group, topic_name) == {0: FIRST}
    assert run(broker.bootstrap, topic_name, group, N - FIRST) == list(range(FIRST, N))
    assert committed(broker.bootstrap, group, topic_name) == {0: N}


def test_two_groups_read_independently(broker: BrokerProcess, topic_name: str) -> None:
    fill(broker.bootstrap, topic_name)
    g1, g2 = unique("indep-a"), unique("indep-b")
    assert confluent_run(broker.bootstrap, topic_name, g1, N) == list(range(N))
    assert kafka_python_run(broker.bootstrap, topic_name, g2, 3) == [0, 1, 2]
    assert committed(broker.bootstrap, g1, topic_name) == {0: N}
    assert committed(broker.bootstrap, g2, topic_name) == {0: 3}
    assert confluent_run(broker.bootstrap, topic_name, g2, N - 3) == list(range(3, N))
    assert committed(broker.bootstrap, g1, topic_name) == {0: N}


def test_unknown_group_has_no_committed_offsets(broker: BrokerProcess, topic_name: str) -> None:
    fill(broker.bootstrap, topic_name)
    assert committed(broker.bootstrap, unique("never-used"), topic_name) == {0: None}


def test_commits_survive_restarts(own_broker: BrokerProcess, topic_name: str) -> None:
    fill(own_broker.bootstrap, topic_name)
    group = unique("durable")
    assert confluent_run(own_broker.bootstrap, topic_name, group, 3) == [0, 1, 2]
    own_broker.restart()
    assert committed(own_broker.bootstrap, group, topic_name) == {0: 3}
    assert kafka_python_run(own_broker.bootstrap, topic_name, group, 3) == [3, 4, 5]
    own_broker.restart(hard=True)
    assert committed(own_broker.bootstrap, group, topic_name) == {0: 6}
    assert confluent_run(own_broker.bootstrap, topic_name, group, N - 6) == list(range(6, N))
