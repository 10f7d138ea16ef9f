"""Metadata, Produce, Fetch and ListOffsets over a real socket with our own codec."""

from __future__ import annotations

import pytest
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from records_util import make_batch, offsets_of, values_of


def create(client: Client, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    resp = client.request(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 5000,
        },
    )
    assert resp.topics[0].error_code == 0, resp


def produce(
    client: Client, topic: str, records: bytes, *, acks: int = -1, partition: int = 0, version: int = 9
) -> object:
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    if acks == 0:
        client.send(ApiKey.PRODUCE, version, body)
        return None
    return client.request(ApiKey.PRODUCE, version, body).responses[0].partition_responses[0]


def fetch_body(
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    isolation: int = 0,
    max_bytes: int = 1 << 20,
) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def fetch(client: Client, topic: str, offset: int, *, version: int = 12, **kw: int) -> object:
    resp = client.request(ApiKey.FETCH, version, fetch_body(topic, offset, **kw))
    assert resp.error_code == 0 and resp.session_id == 0
    return resp.responses[0].partitions[0]


def test_metadata_auto_creates_unknown_topic(client: Client, broker: BrokerThread) -> None:
    resp = client.request(
        ApiKey.METADATA, 12, {"topics": [{"name": "auto-topic"}], "allow_auto_topic_creation": True}
    )
    (topic,) = resp.topics
    assert topic.error_code == 0 and topic.name == "auto-topic"
    assert [p.partition_index for p in topic.partitions] == [0]
    assert topic.partitions[0].leader_id == broker.broker.node_id
    assert resp.brokers[0].port == broker.address[1]
    assert resp.cluster_id


def test_metadata_without_auto_create(client: Client) -> None:
    resp = client.request(
        ApiKey.METADATA, 12, {"topics": [{"name": "nope"}], "allow_auto_topic_creation": False}
    )
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    resp = client.request(ApiKey.METADATA, 1, {"topics": [{"name": "bad topic!"}]})
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize(("pv", "fv"), [(9, 12), (3, 4), (7, 11)])
def test_produce_fetch_round_trip(client: Client, pv: int, fv: int) -> None:
    create(client, "rt")
    first = produce(client, "rt", make_batch([b"a", b"b", b"c"]), version=pv)
    assert first.error_code == 0 and first.base_offset == 0
    second = produce(client, "rt", make_batch([b"d"], compression=1), version=pv)
    assert second.base_offset == 3
    part = fetch(client, "rt", 0, version=fv)
    assert part.error_code == 0 and part.high_watermark == 4
    assert values_of(part.records) == [b"a", b"b", b"c", b"d"]
    assert offsets_of(part.records) == [0, 1, 2, 3]
    part = fetch(client, "rt", 3, version=fv)
    assert values_of(part.records) == [b"d"]
    part = fetch(client, "rt", 4, version=fv)
    assert not part.records and part.high_watermark == 4


def test_fetch_returns_a_whole_batch_beyond_max_bytes(client: Client) -> None:
    create(client, "big")
    produce(client, "big", make_batch([b"x" * 5000]))
    part = fetch(client, "big", 0, max_bytes=100)
    assert values_of(part.records) == [b"x" * 5000]


def test_fetch_out_of_range_and_unknown(client: Client) -> None:
    create(client, "oor")
    produce(client, "oor", make_batch([b"a"]))
    assert fetch(client, "oor", 5).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert fetch(client, "missing", 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_read_committed_reports_stable_offset(client: Client) -> None:
    create(client, "rc")
    produce(client, "rc", make_batch([b"a", b"b"]))
    part = fetch(client, "rc", 0, isolation=1)
    assert part.last_stable_offset == 2 and part.aborted_transactions == []
    assert values_of(part.records) == [b"a", b"b"]


def test_produce_errors(broker: BrokerThread, client: Client) -> None:
    create(client, "errs", configs={"max.message.bytes": "2000"})
    assert produce(client, "errs", make_batch([b"x" * 3000])).error_code == ErrorCode.MESSAGE_TOO_LARGE
    bad = bytearray(make_batch([b"hello"]))
    bad[-1] ^= 0xFF
    assert produce(client, "errs", bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
    two = make_batch([b"a"]) + make_batch([b"b"])
    assert produce(client, "errs", two).error_code == ErrorCode.INVALID_RECORD
    assert produce(client, "errs", make_batch([b"a"])[:-3]).error_code == ErrorCode.CORRUPT_MESSAGE
    assert produce(client, "nope", make_batch([b"a"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(client, "errs", make_batch([b"ok"])).base_offset == 0


def test_clients_cannot_append_to_internal_topics(client: Client) -> None:
    group = {"key": "g-internal", "key_type": 0}
    assert client.request(ApiKey.FIND_COORDINATOR, 3, group).error_code == ErrorCode.NONE
    entry = produce(client, "__consumer_offsets", make_batch([b"forged"]))
    assert entry.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_acks_zero_gets_no_response(client: Client) -> None:
    create(client, "fire")
    produce(client, "fire", make_batch([b"a"]), acks=0)
    corr = client.send(ApiKey.API_VERSIONS, 3, {})
    got, resp = client.recv()
    assert got == corr and resp.error_code == 0
    assert values_of(fetch(client, "fire", 0).records) == [b"a"]


def test_failed_acks_zero_produce_closes_the_connection(client: Client) -> None:
    produce(client, "no-such-topic", make_batch([b"a"]), acks=0)
    assert client.is_closed()


def test_responses_stay_in_order_behind_a_long_poll(broker: BrokerThread, client: Client) -> None:
    create(client, "lp")
    fetch_corr = client.send(ApiKey.FETCH, 12, fetch_body("lp", 0, max_wait_ms=20000, min_bytes=1))
    meta_corr = client.send(ApiKey.METADATA, 12, {"topics": None})
    other = Client(broker.address)
    assert produce(other, "lp", make_batch([b"wake"])).error_code == 0
    other.close()
    got, resp = client.recv()
    assert got == fetch_corr
    assert values_of(resp.responses[0].partitions[0].records) == [b"wake"]
    got, resp = client.recv()
    assert got == meta_corr


def test_long_poll_times_out_empty(client: Client) -> None:
    create(client, "lp2")
    part = fetch(client, "lp2", 0, max_wait_ms=50)
    assert part.error_code == 0 and not part.records


def test_short_long_polls_are_answered(client: Client) -> None:
    """A wait of a millisecond or two ends even when the loop's clock reads a hair before the deadline
    as the timer fires (uvloop's clock has millisecond steps)."""
    create(client, "lp3")
    for wait_ms in [1, 2, 3, 5, 7, 11] * 5:
        part = fetch(client, "lp3", 0, max_wait_ms=wait_ms)
        assert part.error_code == 0 and not part.records


def test_list_offsets(client: Client) -> None:
    create(client, "lo")
    produce(client, "lo", make_batch([b"a", b"b"], timestamp=1000))
    produce(client, "lo", make_batch([b"c"], timestamp=5000))

    def ask(ts: int) -> tuple[int, int, int]:
        resp = client.request(
            ApiKey.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [{"name": "lo", "partitions": [{"partition_index": 0, "timestamp": ts}]}],
            },
        )
        p = resp.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert ask(-2)[:2] == (0, 0)
    assert ask(-1)[:2] == (0, 3)
    assert ask(1001)[:2] == (0, 1)
    assert ask(3000)[:2] == (0, 2)
    assert ask(9000)[:2] == (0, -1)
    assert ask(-3) == (0, 2, 5000)


def test_timestamps_too_far_in_the_future_are_refused(client: Client) -> None:
    import time

    create(client, "future", configs={"message.timestamp.after.max.ms": "60000"})
    later = time.time_ns() // 1_000_000 + 3_600_000
    assert (
        produce(client, "future", make_batch([b"x"], timestamp=later)).error_code
        == ErrorCode.INVALID_TIMESTAMP
    )
    assert produce(client, "future", make_batch([b"x"])).error_code == 0


def test_acks_all_needs_min_insync_replicas(client: Client) -> None:
    create(client, "isr", configs={"min.insync.replicas": "2"})
    assert produce(client, "isr", make_batch([b"x"]), acks=-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(client, "isr", make_batch([b"x"]), acks=1).error_code == 0
