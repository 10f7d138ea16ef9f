"""Transactional producers of every client against a real broker: committed transactions are
seen by read_committed consumers, aborted ones only by read_uncommitted consumers."""

from __future__ import annotations

import base64
import subprocess

import pytest
from compat_broker import BrokerProcess
from compat_clients import consume, create_topic, kafkajs, unique
from compat_txn import confluent_txn_producer, kafkajs_txn, read_to_end, write_end


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def test_confluent_commit_and_abort(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = confluent_txn_producer(broker.bootstrap, unique("cf-txn"))
    try:
        for tag, commit in (("c1", True), ("a1", False), ("c2", True), ("a2", False)):
            p.begin_transaction()
            for i, v in enumerate(values(tag, 10)):
                p.produce(topic_name, value=v, partition=i % 2)
            if commit:
                p.commit_transaction(30)
            else:
                assert p.flush(30) == 0  # written to the log first, so the abort leaves markers behind
                p.abort_transaction(30)
    finally:
        p.flush(10)
    write_end(broker.bootstrap, topic_name, (0, 1))
    committed = read_to_end(broker.bootstrap, topic_name, (0, 1), committed=True)
    everything = read_to_end(broker.bootstrap, topic_name, (0, 1), committed=False)
    for part in (0, 1):
        def sent(*tags: str, part: int = part) -> list[bytes]:
            return [v for tag in tags for i, v in enumerate(values(tag, 10)) if i % 2 == part]

        assert committed[part] == sent("c1", "c2")
        assert everything[part] == sent("c1", "a1", "c2", "a2")


def test_kafka_python_transactional_producer(broker: BrokerProcess, topic_name: str) -> None:
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, topic_name)
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id=unique("kp-txn"), max_block_ms=30000
    )
    try:
        p.init_transactions()
        p.begin_transaction()
        for v in values("kc", 5):
            p.send(topic_name, value=v, partition=0)
        p.commit_transaction()
        p.begin_transaction()
        for v in values("ka", 5):
            p.send(topic_name, value=v, partition=0)
        p.flush(30)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic_name, value=b"kc-last", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    write_end(broker.bootstrap, topic_name, (0,))
    committed = read_to_end(broker.bootstrap, topic_name, (0,), committed=True)[0]
    assert committed == [*values("kc", 5), b"kc-last"]
    everything = read_to_end(broker.bootstrap, topic_name, (0,), committed=False)[0]
    assert everything == [*values("kc", 5), *values("ka", 5), b"kc-last"]
    # kafka-python's own consumer honours read_committed too
    config = {"isolation_level": "read_committed"}
    got = consume("kafka-python", broker.bootstrap, topic_name, 7, config=config)
    assert [r.value for r in got] == [*values("kc", 5), b"kc-last", b"__end__"]


def test_kafkajs_transactions(broker: BrokerProcess, topic_name: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("kafkajs")
    create_topic(broker.bootstrap, topic_name)
    doc = kafkajs_txn(
        {
            "brokers": [broker.bootstrap],
            "transactionalId": unique("js-txn"),
            "transactions": [
                {"topic": topic_name, "values": ["j1", "j2"], "partition": 0, "end": "commit"},
                {"topic": topic_name, "values": ["x1", "x2"], "partition": 0, "end": "abort"},
                {"topic": topic_name, "values": ["j3"], "partition": 0, "end": "commit"},
            ],
        }
    )
    assert [r["end"] for r in doc["results"]] == ["commit", "abort", "commit"]
    write_end(broker.bootstrap, topic_name, (0,))
    assert read_to_end(broker.bootstrap, topic_name, (0,), committed=True)[0] == [b"j1", b"j2", b"j3"]
    assert read_to_end(broker.bootstrap, topic_name, (0,), committed=False)[0] == [
        b"j1", b"j2", b"x1", b"x2", b"j3",
    ]
    # kafkajs consumers read committed by default
    out = kafkajs(
        "consume",
        {"brokers": [broker.bootstrap], "topic": topic_name, "groupId": unique("js-read"), "count": 4,
         "timeoutMs": 30000},
        timeout=60,
    )
    assert [base64.b64decode(m["value_b64"]) for m in out["messages"]] == [b"j1", b"j2", b"j3", b"__end__"]


def test_kcat_transactional_produce(broker: BrokerProcess, topic_name: str, kcat: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    lines = b"".join(v + b"\n" for v in values("kcat", 6))
    subprocess.run(
        [kcat, "-b", broker.bootstrap, "-P", "-t", topic_name, "-p", "0", "-X",
         f"transactional.id={unique('kcat-txn')}", "-m", "30"],
        input=lines,
        capture_output=True,
        timeout=60,
        check=True,
    )
    write_end(broker.bootstrap, topic_name, (0,))
    assert read_to_end(broker.bootstrap, topic_name, (0,), committed=True)[0] == values("kcat", 6)
    # kcat reads with read_committed as well
    out = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e",
         "-X", "isolation.level=read_committed", "-m", "30"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split(b"\n")[:7] == [*values("kcat", 6), b"__end__"]


def test_aiokafka_transactions(broker: BrokerProcess, topic_name: str) -> None:
    """aiokafka speaks the oldest versions (InitProducerId / AddPartitionsToTxn / EndTxn v0)."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("aio-txn"))
        await asyncio.wait_for(p.start(), 30)
        try:
            async with p.transaction():
                for v in values("ac", 4):
                    await p.send(topic_name, value=v, partition=0)
            await p.begin_transaction()
            await (await p.send(topic_name, value=b"aa", partition=0))
            await p.abort_transaction()
            async with p.transaction():
                await p.send(topic_name, value=b"ac-last", partition=0)
        finally:
            await asyncio.wait_for(p.stop(), 20)

    create_topic(broker.bootstrap, topic_name)
    asyncio.run(run())
    write_end(broker.bootstrap, topic_name, (0,))
    committed = read_to_end(broker.bootstrap, topic_name, (0,), committed=True)[0]
    assert committed == [*values("ac", 4), b"ac-last"]
    everything = read_to_end(broker.bootstrap, topic_name, (0,), committed=False)[0]
    assert everything == [*values("ac", 4), b"aa", b"ac-last"]


@pytest.mark.parametrize("client", ["kafka-python", "kafkajs", "aiokafka"])
def test_offsets_sent_to_the_transaction(
    broker: BrokerProcess, topic_name: str, client: str, request: pytest.FixtureRequest
) -> None:
    """TxnOffsetCommit from each client: offsets count once the transaction commits, not if it aborts."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    create_topic(broker.bootstrap, topic_name)
    group = unique(f"{client}-txn-group")
    txn_id = unique(f"{client}-txn")
    if client == "kafka-python":
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id, max_block_ms=30000)
        try:
            p.init_transactions()
            for offset, commit in ((7, True), (99, False)):
                p.begin_transaction()
                p.send(topic_name, value=b"x", partition=0)
                p.send_offsets_to_transaction(
                    {TopicPartition(topic_name, 0): OffsetAndMetadata(offset, "", -1)}, group
                )
                if commit:
                    p.commit_transaction()
                else:
                    p.abort_transaction()
        finally:
            p.close(timeout=10)
    elif client == "kafkajs":
        request.getfixturevalue("kafkajs")
        offsets = {"groupId": group, "topic": topic_name}
        kafkajs_txn(
            {
                "brokers": [broker.bootstrap],
                "transactionalId": txn_id,
                "transactions": [
                    {"topic": topic_name, "values": ["x"], "partition": 0, "end": "commit",
                     "offsets": {**offsets, "partitions": [{"partition": 0, "offset": 7}]}},
                    {"topic": topic_name, "values": ["y"], "partition": 0, "end": "abort",
                     "offsets": {**offsets, "partitions": [{"partition": 0, "offset": 99}]}},
                ],
            }
        )
    else:
        import asyncio

        from aiokafka import AIOKafkaProducer
        from aiokafka.structs import TopicPartition as AioTP

        async def run() -> None:
            p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=txn_id)
            await asyncio.wait_for(p.start(), 30)
            try:
                for offset, commit in ((7, True), (99, False)):
                    await p.begin_transaction()
                    await p.send(topic_name, value=b"x", partition=0)
                    await p.send_offsets_to_transaction({AioTP(topic_name, 0): offset}, group)
                    if commit:
                        await p.commit_transaction()
                    else:
                        await p.abort_transaction()
            finally:
                await asyncio.wait_for(p.stop(), 20)

        asyncio.run(run())
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, request_timeout_ms=20000)
    try:
        assert c.committed(TopicPartition(topic_name, 0)) == 7
    finally:
        c.close()
