"""Share-group admin over a real socket: DescribeShareGroupOffsets (v1 with lag), pylog's own
PylogShareGroupState (in-flight and acquired counts), AlterShareGroupOffsets and
DeleteShareGroupOffsets, driven around an unmodified confluent-kafka ShareConsumer; and the share
shell's leadership entry points."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey, PylogApiKey
from pylog.protocol.errors import ErrorCode

TOPIC, GROUP = "orders", "workers"
DEADLINE_S = 30.0


@pytest.fixture
def share_broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data", {"share.auto.offset.reset": "earliest"}).start()
    yield b
    b.stop()


def bootstrap(b: BrokerThread) -> str:
    host, port = b.address
    return f"{host}:{port}"


def setup(b: BrokerThread, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(b)})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": bootstrap(b)})
    for i in range(n):
        p.produce(TOPIC, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0


def take(b: BrokerThread, want: int, ack: AcknowledgeType | None) -> tuple[ShareConsumer, list[int]]:
    """A share consumer that polls until `want` records came, acknowledging them with `ack`."""
    c = ShareConsumer(
        {"bootstrap.servers": bootstrap(b), "group.id": GROUP, "share.acknowledgement.mode": "explicit"}
    )
    c.subscribe([TOPIC])
    got: list[int] = []
    end = time.monotonic() + DEADLINE_S
    while len(got) < want and time.monotonic() < end:
        batch = [m for m in c.poll(0.2) if m.error() is None]
        for m in batch:
            got.append(int(m.value()))
            if ack is not None:
                c.acknowledge(m, ack)
        if batch and ack is not None:
            c.commit_sync()
    return c, got


def describe(client: Client) -> object:
    resp = client.request(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": GROUP, "topics": None}]}
    )
    return resp.groups[0]


def counts(client: Client) -> tuple[int, int, int]:
    """(start offset, in flight, acquired) of the group's one share partition (PylogShareGroupState)."""
    resp = client.request(PylogApiKey.SHARE_GROUP_STATE, 0, {"group_id": GROUP})
    assert resp.error_code == 0
    p = resp.topics[0].partitions[0]
    return p.start_offset, p.in_flight_records, p.acquired_records


def test_describe_alter_delete_share_group_offsets(share_broker: BrokerThread) -> None:
    setup(share_broker, 10)
    client = Client(share_broker.address)
    try:
        c, got = take(share_broker, 3, None)  # acquired, not acknowledged
        assert len(got) >= 3
        g = describe(client)
        p = g.topics[0].partitions[0]
        assert (g.error_code, p.start_offset, p.lag) == (0, 0, 10)  # acquired is not done
        assert counts(client) == (0, len(got), len(got))
        body = {
            "group_id": GROUP,
            "topics": [{"topic_name": TOPIC, "partitions": [{"partition_index": 0, "start_offset": 5}]}],
        }
        assert (
            client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body).error_code == ErrorCode.NON_EMPTY_GROUP
        )
        c.close()  # leaves the group; its records are released
        resp = client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body)
        assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
        p = describe(client).topics[0].partitions[0]
        assert (p.start_offset, p.lag) == (5, 5)
        assert counts(client) == (5, 0, 0)
        c, got = take(share_broker, 5, AcknowledgeType.ACCEPT)
        c.close()
        assert sorted(got) == [5, 6, 7, 8, 9]
        assert describe(client).topics[0].partitions[0].start_offset == 10
        delete = {"group_id": GROUP, "topics": [{"topic_name": TOPIC}, {"topic_name": "nope"}]}
        resp = client.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, delete)
        assert resp.error_code == 0
        assert [r.error_code for r in resp.responses] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert describe(client).topics == []
        c, got = take(share_broker, 10, AcknowledgeType.ACCEPT)  # starts over at share.auto.offset.reset
        c.close()
        assert sorted(got) == list(range(10))
        missing = client.request(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": "nope", "topics": None}]}
        )
        assert missing.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        client.close()


def test_unload_and_load_of_the_state_partition(share_broker: BrokerThread) -> None:
    """Leadership of a `__share_group_state` partition moving away and back: the share partitions
    it backs are dropped, and rebuilt from the log, accepted records staying accepted."""
    setup(share_broker, 6)
    c, got = take(share_broker, 6, AcknowledgeType.ACCEPT)
    c.close()
    assert sorted(got) == list(range(6))
    broker = share_broker.broker
    assert broker is not None and broker.share_state is not None
    shell = broker.share_state
    manager, store = shell.manager, shell.coordinator
    assert manager is not None and store is not None
    (key,) = list(manager.partitions)
    p = store.partition_for(key)
    share_broker.call(lambda: shell.unload_partition(p))
    assert key not in manager.partitions and store.get(key) is None
    share_broker.call(lambda: shell.load_partition(p))
    assert store.get(key) is not None and store.get(key).start_offset == 6


def test_sdk_share_offsets_reads_pylogs_live_counts(share_broker: BrokerThread) -> None:
    """The SDK's share_offsets (what the lag widget shows) takes start offset, in-flight and
    acquired counts from PylogShareGroupState over a real socket."""
    from pylog.sdk.admin import Admin, ShareOffset

    setup(share_broker, 10)
    c, got = take(share_broker, 3, None)
    admin = Admin(bootstrap(share_broker))
    try:

        async def offsets(a: object) -> object:
            return await a.share_offsets(GROUP, await a.find_coordinator(GROUP))  # type: ignore[attr-defined]

        assert admin.run(offsets) == {(TOPIC, 0): ShareOffset(0, len(got), len(got))}
    finally:
        admin.close()
        c.close()
