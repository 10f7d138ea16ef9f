"""ShareFetch over a real socket: forgetting a partition in a share session keeps what the member
acquired there (Kafka's ShareSession.update releases nothing). A consumer whose subscription moves
from one topic to another sends, in one request, the acknowledgements of the old topic's records
and the old topic among the forgotten ones (librdkafka 0170); the acknowledgements are accepted
and the accepted record is never handed out again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey

GROUP = "movers"
ACCEPT = 1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data", {"share.auto.offset.reset": "earliest"}).start()
    yield b
    b.stop()


def share_fetch(
    client: Client, member: str, epoch: int, topics: list, forgotten: list | None = None
) -> object:
    body = {
        "group_id": GROUP,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "max_records": 500,
        "batch_size": 500,
        "topics": topics,
        "forgotten_topics_data": forgotten or [],
    }
    return client.request(ApiKey.SHARE_FETCH, 1, body)


def entries(resp: object) -> dict:
    return {t.topic_id: t.partitions[0] for t in resp.responses}  # type: ignore[attr-defined]


def test_acknowledgements_of_a_forgotten_partition_are_accepted(broker: BrokerThread) -> None:
    host, port = broker.address
    bootstrap = f"{host}:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("old", 1, 1), NewTopic("new", 1, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce("old", b"o", partition=0)
    p.produce("new", b"n", partition=0)
    assert p.flush(30) == 0
    client = Client(broker.address)
    try:
        meta = client.request(ApiKey.METADATA, 12, {"topics": [{"name": "old"}, {"name": "new"}]})
        ids = {t.name: t.topic_id for t in meta.topics}
        old, new = ids["old"], ids["new"]
        first = share_fetch(client, "m-1", 0, [{"topic_id": old, "partitions": [{"partition_index": 0}]}])
        got = entries(first)[old]
        assert [(a.first_offset, a.last_offset) for a in got.acquired_records] == [(0, 0)]
        ack = {"first_offset": 0, "last_offset": 0, "acknowledge_types": [ACCEPT]}
        moved = share_fetch(
            client,
            "m-1",
            1,
            [
                {"topic_id": old, "partitions": [{"partition_index": 0, "acknowledgement_batches": [ack]}]},
                {"topic_id": new, "partitions": [{"partition_index": 0}]},
            ],
            forgotten=[{"topic_id": old, "partitions": [0]}],
        )
        assert moved.error_code == 0
        by_topic = entries(moved)
        assert by_topic[old].acknowledge_error_code == 0, "acknowledgement of a forgotten partition refused"
        assert [(a.first_offset, a.last_offset) for a in by_topic[new].acquired_records] == [(0, 0)]
        assert list(getattr(by_topic.get(old), "acquired_records", [])) == []  # no longer fetched
        other = share_fetch(client, "m-2", 0, [{"topic_id": old, "partitions": [{"partition_index": 0}]}])
        assert [list(e.acquired_records) for e in entries(other).values()] == [[]], "accepted record again"
    finally:
        client.close()
