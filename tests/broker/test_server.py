"""Server limits and failure containment: idle timeout, connection limit, handler bugs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from test_produce_fetch import create

from pylog.broker.network import handler_table


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    b = BrokerThread(tmp_path, {"connections.max.idle.ms": "200"}).start()
    try:
        idle = Client(b.address)
        assert idle.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
        assert idle.is_closed(timeout=30)
        idle.close()
    finally:
        b.stop()


def test_connection_limit(tmp_path: Path) -> None:
    b = BrokerThread(tmp_path, {"max.connections": "2"}).start()
    try:
        first, second = Client(b.address), Client(b.address)
        assert first.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
        assert second.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
        third = Client(b.address)
        assert third.is_closed()
        third.close()
        assert first.request(ApiKey.METADATA, 12, {"topics": None}).brokers
        second.close()
        fourth = Client(b.address)  # a slot is free again
        assert fourth.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
        fourth.close()
        first.close()
    finally:
        b.stop()


@pytest.fixture
def broken_list_offsets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from pylog.broker.handlers import list_offsets

    # the stand-in keeps the module's error answer, as a real handler's bug would
    versions = list_offsets.list_offsets.versions

    @handler_table.serves(ApiKey.LIST_OFFSETS, versions, list_offsets.error_response)
    def bug(ctx: object, req: object, **services: object) -> dict:
        raise RuntimeError("handler bug")

    monkeypatch.setattr(list_offsets, "list_offsets", bug)  # the table is built when the broker starts
    yield


def test_handler_bug_answers_unknown_server_error(broken_list_offsets: None, client: Client) -> None:
    create(client, "bug")
    resp = client.request(
        ApiKey.LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "bug", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert client.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
