"""ShareFetch / ShareAcknowledge v2 over a real socket: ShareAcquireMode (KIP-1206) and RENEW
acknowledgements (KIP-1222). One log batch of 5 records: record_limit mode acquires exactly
MaxRecords of it, batch-optimized mode the whole batch; RENEW restarts the member's locks and is
refused without IsRenewAck; a renewing ShareFetch must not ask for records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

TOPIC, GROUP, MEMBER = "jobs", "renewers", "m-1"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data", {"share.auto.offset.reset": "earliest"}).start()
    yield b
    b.stop()


def fetch(client: Client, topic_id: object, epoch: int, **fields: object) -> object:
    body = {
        "group_id": GROUP,
        "member_id": MEMBER,
        "share_session_epoch": epoch,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "max_records": 500,
        "batch_size": 500,
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}],
        "forgotten_topics_data": [],
        **fields,
    }
    return client.request(ApiKey.SHARE_FETCH, 2, body)


def ack_partition(ack_type: int) -> dict:
    batch = {"first_offset": 0, "last_offset": 1, "acknowledge_types": [ack_type]}
    return {"partition_index": 0, "acknowledgement_batches": [batch]}


def acknowledge(client: Client, topic_id: object, epoch: int, ack_type: int, **fields: object) -> object:
    body = {
        "group_id": GROUP,
        "member_id": MEMBER,
        "share_session_epoch": epoch,
        "topics": [{"topic_id": topic_id, "partitions": [ack_partition(ack_type)]}],
        **fields,
    }
    return client.request(ApiKey.SHARE_ACKNOWLEDGE, 2, body)


def acquired(resp: object) -> list[tuple[int, int]]:
    parts = resp.responses[0].partitions  # type: ignore[attr-defined]
    return [(a.first_offset, a.last_offset) for a in parts[0].acquired_records]


def test_acquire_modes_and_renew(broker: BrokerThread) -> None:
    host, port = broker.address
    bootstrap = f"{host}:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    for i in range(5):
        p.produce(TOPIC, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0  # one batch, offsets 0-4
    client = Client(broker.address)
    try:
        topic_id = client.request(ApiKey.METADATA, 12, {"topics": [{"name": TOPIC}]}).topics[0].topic_id
        first = fetch(client, topic_id, 0, max_records=2, share_acquire_mode=1)
        assert acquired(first) == [(0, 1)]  # record_limit: exactly MaxRecords
        second = fetch(client, topic_id, 1, max_records=1, share_acquire_mode=0)
        assert acquired(second) == [(2, 4)]  # batch-optimized: the rest of the batch
        refused = acknowledge(client, topic_id, 2, 4)
        assert refused.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
        renewed = acknowledge(client, topic_id, 3, 4, is_renew_ack=True)
        assert renewed.error_code == 0 and renewed.responses[0].partitions[0].error_code == 0
        assert renewed.acquisition_lock_timeout_ms > 0
        bad = fetch(client, topic_id, 4, is_renew_ack=True)  # asks for records while renewing
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        topics = [{"topic_id": topic_id, "partitions": [ack_partition(4)]}]
        renew_fetch = fetch(
            client, topic_id, 4, is_renew_ack=True, max_bytes=0, max_records=0, batch_size=0, topics=topics
        )
        assert renew_fetch.error_code == 0
        entry = renew_fetch.responses[0].partitions[0]
        assert entry.acknowledge_error_code == 0 and list(entry.acquired_records) == []
        done = acknowledge(client, topic_id, 5, 1)  # still this member's: ACCEPT works
        assert done.responses[0].partitions[0].error_code == 0
    finally:
        client.close()
