"""Offsets: earliest / latest, offsets_for_times (ListOffsets by timestamp) and seek, per client."""

from __future__ import annotations

import asyncio
import re

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, create_topic, kafkajs_admin, produce, run_cmd

BASE = 1_600_000_000_000
P0 = 10  # records in partition 0, timestamps BASE + 1000*i
P1 = 5  # records in partition 1, timestamps BASE + 500 + 1000*i


@pytest.fixture
def timed_topic(broker: BrokerProcess, topic_name: str) -> str:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    recs = [Rec(f"p0-{i}".encode(), timestamp=BASE + 1000 * i, partition=0) for i in range(P0)]
    recs += [Rec(f"p1-{i}".encode(), timestamp=BASE + 500 + 1000 * i, partition=1) for i in range(P1)]
    produce("confluent-kafka", broker.bootstrap, topic_name, recs)
    return topic_name


# (partition, timestamp) -> (offset, timestamp of that record) or None past the last record
LOOKUPS = [
    ((0, BASE - 50_000), (0, BASE)),
    ((0, BASE), (0, BASE)),
    ((0, BASE + 2500), (3, BASE + 3000)),
    ((0, BASE + 9000), (9, BASE + 9000)),
    ((0, BASE + 9001), None),
    ((1, BASE), (0, BASE + 500)),
    ((1, BASE + 1500), (1, BASE + 1500)),
    ((1, BASE + 4600), None),
]


def test_kafka_python_offsets_for_times(broker: BrokerProcess, timed_topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        for (p, ts), want in LOOKUPS:
            tp = TopicPartition(timed_topic, p)
            got = c.offsets_for_times({tp: ts})[tp]
            assert (None if got is None else (got.offset, got.timestamp)) == want, (p, ts)
        tps = [TopicPartition(timed_topic, p) for p in (0, 1)]
        assert {tp.partition: o for tp, o in c.beginning_offsets(tps).items()} == {0: 0, 1: 0}
        assert {tp.partition: o for tp, o in c.end_offsets(tps).items()} == {0: P0, 1: P1}
    finally:
        c.close()


def test_confluent_offsets_for_times(broker: BrokerProcess, timed_topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets-lookup-" + timed_topic})
    try:
        for (p, ts), want in LOOKUPS:
            [got] = c.offsets_for_times([TopicPartition(timed_topic, p, ts)], timeout=20)
            assert got.error is None
            assert got.offset == (-1 if want is None else want[0]), (p, ts)
        assert c.get_watermark_offsets(TopicPartition(timed_topic, 0), timeout=20) == (0, P0)
        assert c.get_watermark_offsets(TopicPartition(timed_topic, 1), timeout=20) == (0, P1)
    finally:
        c.close()


def test_aiokafka_offsets_for_times(broker: BrokerProcess, timed_topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap)
        await asyncio.wait_for(c.start(), 30)
        try:
            for (p, ts), want in LOOKUPS:
                tp = TopicPartition(timed_topic, p)
                got = (await c.offsets_for_times({tp: ts}))[tp]
                assert (None if got is None else (got.offset, got.timestamp)) == want, (p, ts)
            tps = [TopicPartition(timed_topic, p) for p in (0, 1)]
            assert {tp.partition: o for tp, o in (await c.end_offsets(tps)).items()} == {0: P0, 1: P1}
            assert {tp.partition: o for tp, o in (await c.beginning_offsets(tps)).items()} == {0: 0, 1: 0}
        finally:
            await c.stop()

    asyncio.run(go())


def test_kafkajs_offsets(broker: BrokerProcess, timed_topic: str, kafkajs: object) -> None:
    offs = kafkajs_admin(broker.bootstrap, "fetchTopicOffsets", timed_topic)
    got = {o["partition"]: (o["low"], o["high"], o["offset"]) for o in offs}
    assert got == {0: ("0", str(P0), str(P0)), 1: ("0", str(P1), str(P1))}
    by_ts = kafkajs_admin(broker.bootstrap, "fetchTopicOffsetsByTimestamp", timed_topic, BASE + 2500)
    assert {o["partition"]: o["offset"] for o in by_ts} == {0: "3", 1: "2"}
    # Past the last record kafkajs substitutes the high watermark for Kafka's -1.
    late = kafkajs_admin(broker.bootstrap, "fetchTopicOffsetsByTimestamp", timed_topic, BASE + 60_000)
    assert {o["partition"]: o["offset"] for o in late} == {0: str(P0), 1: str(P1)}


def test_kcat_query_offsets(broker: BrokerProcess, timed_topic: str, kcat: str) -> None:
    def query(p: int, ts: int) -> int:
        out = run_cmd([kcat, "-b", broker.bootstrap, "-Q", "-t", f"{timed_topic}:{p}:{ts}", "-m", "20"])
        m = re.search(rb"\[\s*%d\s*\]\s+offset\s+(-?\d+)" % p, out.stdout)
        assert m, out.stdout
        return int(m.group(1))

    assert query(0, BASE + 2500) == 3
    assert query(1, BASE + 1500) == 1
    assert query(0, -1) == P0  # -1: latest
    assert query(0, -2) == 0  # -2: earliest


# --------------------------------------------------------------------------------------------- seek


def test_kafka_python_seek(broker: BrokerProcess, timed_topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(timed_topic, 0)
    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", request_timeout_ms=20000
    )
    try:
        c.assign([tp])

        def first() -> int:
            for _ in range(40):
                msgs = c.poll(timeout_ms=500, max_records=1).get(tp)
                if msgs:
                    return msgs[0].offset
            raise AssertionError("no record after seek")

        c.seek(tp, 6)
        assert first() == 6
        c.seek(tp, 2)
        assert first() == 2
        c.seek_to_end(tp)
        assert c.position(tp) == P0
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0
        assert first() == 0
        c.seek(tp, 1000)  # out of range: OFFSET_OUT_OF_RANGE, then auto_offset_reset=earliest
        assert first() == 0
    finally:
        c.close()


def test_confluent_seek(broker: BrokerProcess, timed_topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "seek-" + timed_topic,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )

    def first() -> int:
        for _ in range(60):
            m = c.poll(0.5)
            if m is not None and not m.error():
                return m.offset()
        raise AssertionError("no record after seek")

    try:
        c.assign([TopicPartition(timed_topic, 0, 6)])
        assert first() == 6
        c.seek(TopicPartition(timed_topic, 0, 2))
        assert first() == 2
        c.unassign()
        c.assign([TopicPartition(timed_topic, 0, 1000)])  # out of range -> reset to earliest
        assert first() == 0
    finally:
        c.close()


def test_aiokafka_seek(broker: BrokerProcess, timed_topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> None:
        tp = TopicPartition(timed_topic, 1)
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await asyncio.wait_for(c.start(), 30)
        try:
            c.assign([tp])
            c.seek(tp, 3)
            assert (await asyncio.wait_for(c.getone(), 20)).offset == 3
            await c.seek_to_beginning(tp)
            assert (await asyncio.wait_for(c.getone(), 20)).offset == 0
            await c.seek_to_end(tp)
            assert await c.position(tp) == P1
        finally:
            await c.stop()

    asyncio.run(go())


def test_kcat_start_offsets(broker: BrokerProcess, timed_topic: str, kcat: str) -> None:
    def offsets(*args: str) -> list[int]:
        out = run_cmd(
            [kcat, "-b", broker.bootstrap, "-C", "-t", timed_topic, "-p", "0", "-e", "-f", "%o\n", *args]
        )
        return [int(x) for x in out.stdout.split()]

    assert offsets("-o", "6") == [6, 7, 8, 9]
    assert offsets("-o", "-3") == [7, 8, 9]
    assert offsets("-o", f"s@{BASE + 7500}") == [8, 9]
    assert offsets("-o", "beginning", "-c", "2") == [0, 1]
