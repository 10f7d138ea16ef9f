"""Broken frames close only the connection that sent them; the broker keeps serving."""

from __future__ import annotations

import struct

import pytest
from harness import BrokerThread, Client
from pylog.protocol import api
from pylog.protocol.api import ApiKey


def _still_serving(broker: BrokerThread) -> None:
    other = Client(broker.address)
    try:
        assert other.request(ApiKey.API_VERSIONS, 3, {}).error_code == 0
    finally:
        other.close()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\xde\xad\xbe\xef" * 64, id="garbage"),
        pytest.param(struct.pack(">i", 2**31 - 1) + b"x" * 100, id="huge-length"),
        pytest.param(struct.pack(">i", -5) + b"x" * 10, id="negative-length"),
        pytest.param(struct.pack(">i", 6) + b"\x00\x03\x00\x01\x00\x00", id="frame-shorter-than-header"),
        pytest.param(
            struct.pack(">i", 12) + struct.pack(">hhih", 3, 12, 1, 200) + b"ab", id="truncated-client-id"
        ),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1), id="unknown-api-key"),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1), id="unknown-version"),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 4, 0, 1, -1), id="unserved-api"),
    ],
)
def test_bad_frame_closes_that_connection_only(broker: BrokerThread, payload: bytes) -> None:
    bystander = Client(broker.address)
    bad = Client(broker.address)
    try:
        assert bystander.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0
        bad.send_raw(payload)
        assert bad.is_closed()
        assert bystander.request(ApiKey.METADATA, 12, {"topics": []}).brokers
        _still_serving(broker)
    finally:
        bad.close()
        bystander.close()


def test_truncated_frame_then_disconnect(broker: BrokerThread) -> None:
    c = Client(broker.address)
    c.send_raw(struct.pack(">i", 100) + b"\x00\x12\x00\x00")
    c.close()
    _still_serving(broker)


def test_frame_above_socket_request_max_bytes(tmp_path) -> None:
    b = BrokerThread(tmp_path, {"socket.request.max.bytes": "1000"}).start()
    try:
        c = Client(b.address)
        c.send_raw(struct.pack(">i", 1001) + b"\x00" * 1001)
        assert c.is_closed()
        c.close()
        _still_serving(b)
    finally:
        b.stop()


def test_frames_before_a_broken_one_are_answered(broker: BrokerThread) -> None:
    c = Client(broker.address)
    good = api.encode_request(ApiKey.API_VERSIONS, 3, 41, "x", {})
    c._sent[41] = (ApiKey.API_VERSIONS, 3)
    c.send_raw(good + struct.pack(">i", -1) + b"junk")
    corr, resp = c.recv()
    assert corr == 41 and resp.error_code == 0
    assert c.is_closed()
    c.close()
    _still_serving(broker)
