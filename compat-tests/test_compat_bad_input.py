"""Malformed input on raw sockets: each bad connection gets an error or is closed, and the broker
keeps serving everyone else (a connection opened beforehand, a new one, and a real client)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce
from compat_raw import (
    API_VERSIONS,
    METADATA,
    PRODUCE,
    RawConn,
    Reader,
    api_versions,
    frame,
    header,
    kbytes,
    kstr,
    parse_api_versions_v0,
    record_batch,
)
from compat_raw import produce as raw_produce
from pylog.protocol import api

UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2


@pytest.fixture
def survivor(broker: BrokerProcess) -> Iterator[RawConn]:
    """A healthy connection opened before the bad input; it must still be answered afterwards."""
    with RawConn("127.0.0.1", broker.port) as conn:
        assert api_versions(conn).error_code == 0
        yield conn


def assert_still_serving(broker: BrokerProcess, survivor: RawConn, topic: str) -> None:
    assert api_versions(survivor).error_code == 0
    with RawConn("127.0.0.1", broker.port) as fresh:
        assert api_versions(fresh).error_code == 0
    create_topic(broker.bootstrap, topic)
    produce("kafka-python", broker.bootstrap, topic, [Rec(b"still here", partition=0)])
    assert [r.value for r in consume("kafka-python", broker.bootstrap, topic, 1)] == [b"still here"]
    assert broker.alive()


def expect_error_or_close(conn: RawConn, correlation_id: int | None = None) -> None:
    kind, payload = conn.outcome()
    if kind == "frame" and correlation_id is not None:
        assert payload is not None and Reader(payload).i32() == correlation_id


def test_api_versions_v0(broker: BrokerProcess) -> None:
    """The handshake every client starts with; versions start at 0 (old librdkafka checks exact ranges)."""
    with RawConn("127.0.0.1", broker.port) as conn:
        res = api_versions(conn, 0)
        assert res.error_code == 0
        for key in (0, 1, 2, 3, 18):  # Produce, Fetch, ListOffsets, Metadata, ApiVersions
            assert key in res.versions, f"API {key} not advertised"
            assert res.versions[key][0] == 0
        assert res.versions[18][1] >= 3
        assert res.versions[0][1] >= 3 and res.versions[1][1] >= 4  # record batch v2


def test_api_versions_unsupported_version_answers_35(broker: BrokerProcess) -> None:
    """An ApiVersions version above the broker's range gets UNSUPPORTED_VERSION in a v0 body (KIP-511)."""
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(header(API_VERSIONS, 999, 77) + b"\x00" * 8))
        r = Reader(conn.recv_frame())
        assert r.i32() == 77
        res = parse_api_versions_v0(r)
        assert res.error_code == UNSUPPORTED_VERSION
        assert 18 in res.versions


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", id="http-request"),
        pytest.param(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64, id="size-2GiB"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 64, id="size-200MiB"),
        pytest.param(struct.pack(">i", -1) + b"\x00" * 16, id="size-minus-1"),
        pytest.param(struct.pack(">i", -(2**31)) + b"\x00" * 16, id="size-int-min"),
    ],
)
def test_bad_size_prefix_closes(
    broker: BrokerProcess, survivor: RawConn, topic_name: str, data: bytes
) -> None:
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(data)
        assert conn.outcome() == ("closed", None)
    assert_still_serving(broker, survivor, topic_name)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"", id="empty-frame"),
        pytest.param(b"\x01", id="one-byte"),
        pytest.param(bytes(range(7)), id="short-header"),
        pytest.param(b"\xde\xad\xbe\xef" * 16, id="random-words"),
        pytest.param(bytes((i * 37 + 11) % 256 for i in range(3000)), id="noise-3000"),
    ],
)
def test_garbage_frame(broker: BrokerProcess, survivor: RawConn, topic_name: str, payload: bytes) -> None:
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(payload))
        expect_error_or_close(conn)
    assert_still_serving(broker, survivor, topic_name)


def test_unknown_api_key(broker: BrokerProcess, survivor: RawConn, topic_name: str) -> None:
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(header(9999, 0, 5) + b"\x00" * 10))
        expect_error_or_close(conn, 5)
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(header(-7, 0, 6)))
        expect_error_or_close(conn, 6)
    assert_still_serving(broker, survivor, topic_name)


@pytest.mark.parametrize(("api_key", "version"), [(METADATA, 999), (PRODUCE, 99), (1, 500), (METADATA, -1)])
def test_unknown_api_version(
    broker: BrokerProcess, survivor: RawConn, topic_name: str, api_key: int, version: int
) -> None:
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(header(api_key, version, 9) + b"\x00" * 12))
        expect_error_or_close(conn, 9)
    assert_still_serving(broker, survivor, topic_name)


def test_truncated_body(broker: BrokerProcess, survivor: RawConn, topic_name: str) -> None:
    """A Metadata v1 frame whose topic array claims 5 entries but holds half of one."""
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(header(METADATA, 1, 11) + struct.pack(">i", 5) + struct.pack(">h", 40) + b"abc"))
        expect_error_or_close(conn, 11)
    assert_still_serving(broker, survivor, topic_name)


def test_truncated_frame_then_eof(broker: BrokerProcess, survivor: RawConn, topic_name: str) -> None:
    with RawConn("127.0.0.1", broker.port) as conn:
        full = frame(header(API_VERSIONS, 0, 3))
        conn.send(full[:-3])
        conn.sock.shutdown(socket.SHUT_WR)
        assert conn.outcome() == ("closed", None)
    assert_still_serving(broker, survivor, topic_name)


def test_partial_frame_does_not_block_others(
    broker: BrokerProcess, survivor: RawConn, topic_name: str
) -> None:
    """A client that stalls mid-frame holds only its own connection."""
    with RawConn("127.0.0.1", broker.port) as stalled:
        stalled.send(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
        assert_still_serving(broker, survivor, topic_name)
        stalled.send(b"\x00" * 10)
        assert_still_serving(broker, survivor, topic_name + "-2")


def test_many_requests_pipelined_answered_in_order(broker: BrokerProcess) -> None:
    """Clients pipeline requests; responses come back in request order."""
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(b"".join(frame(header(API_VERSIONS, 0, cid)) for cid in range(100, 150)))
        for cid in range(100, 150):
            r = Reader(conn.recv_frame())
            assert r.i32() == cid
            assert parse_api_versions_v0(r).error_code == 0


def test_corrupt_record_batch_crc(broker: BrokerProcess, survivor: RawConn, topic_name: str) -> None:
    """A batch whose CRC does not match is refused with CORRUPT_MESSAGE and nothing is appended."""
    create_topic(broker.bootstrap, topic_name)
    batch = bytearray(record_batch([b"one", b"two"]))
    batch[-1] ^= 0xFF  # flip the last byte of the last record: the CRC no longer matches
    with RawConn("127.0.0.1", broker.port) as conn:
        res = raw_produce(conn, topic_name, 0, bytes(batch))
        assert res.error_code == CORRUPT_MESSAGE
        good = raw_produce(conn, topic_name, 0, record_batch([b"fine"]))
        assert (good.error_code, good.base_offset) == (0, 0)


def test_produce_garbage_records_field(broker: BrokerProcess, survivor: RawConn, topic_name: str) -> None:
    """Records bytes that are not a record batch: an error for that partition, or a closed connection."""
    create_topic(broker.bootstrap, topic_name)
    body = (
        kstr(None)
        + struct.pack(">hi", -1, 30000)
        + struct.pack(">i", 1)
        + kstr(topic_name)
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + kbytes(b"\x00" * 12 + b"\xff\xff\xff\xf0" + b"junk" * 20)
    )
    with RawConn("127.0.0.1", broker.port) as conn:
        conn.send(frame(header(PRODUCE, 3, 21) + body))
        kind, payload = conn.outcome()
        if kind == "frame":
            assert payload is not None
            r = Reader(payload)
            assert r.i32() == 21
            assert r.i32() == 1 and r.string() == topic_name and r.i32() == 1 and r.i32() == 0
            assert r.i16() != 0, "garbage records were accepted"
    assert_still_serving(broker, survivor, topic_name + "-after")


def _send_for(s: socket.socket, data: bytes, seconds: float) -> int:
    """Bytes of ``data`` the kernel takes within ``seconds`` (it stops taking them once the
    broker no longer reads and the socket buffers are full)."""
    s.setblocking(False)
    sent, deadline = 0, time.monotonic() + seconds
    view = memoryview(data)
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += s.send(view[sent : sent + 65536])
        except BlockingIOError:
            time.sleep(0.01)
    s.setblocking(True)
    return sent


def _answers_until_closed(s: socket.socket) -> list[int]:
    """The correlation ids of the frames read until the broker closes."""
    ids, data = [], b""
    s.settimeout(10)
    while chunk := s.recv(1 << 20):
        data += chunk
        while len(data) >= 4 and len(data) >= 4 + struct.unpack(">i", data[:4])[0]:
            size = struct.unpack(">i", data[:4])[0]
            ids.append(struct.unpack(">i", data[4:8])[0])
            data = data[4 + size :]
    return ids


@pytest.mark.parametrize("bound", ["1", "-1"])
def test_reads_pause_while_waiting_requests_hold_queued_max_request_bytes(tmp_path: Path, bound: str) -> None:
    """A long-polling fetch holds its connection's request bytes; past queued.max.request.bytes the
    broker reads nothing more from that connection until it is answered, so a 40 MB frame sent
    behind it stalls in the socket buffers instead of being read into the broker's memory. The
    frame is of no known api: once read, the connection closes, after the fetch's answer."""
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config={"queued.max.request.bytes": bound})
    try:
        b.start()
        create_topic(b.bootstrap, "waits")
        body = {
            "replica_id": -1,
            "max_wait_ms": 2000,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "topics": [
                {
                    "topic": "waits",
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
            ],
        }
        big = struct.pack(">ihh", 40 << 20, 0x7FFF, 0) + bytes((40 << 20) - 4)  # an unknown api key
        with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
            s.sendall(api.encode_request(1, 4, 7, "raw", body))
            time.sleep(0.2)  # the fetch is read and waiting
            taken = _send_for(s, big, 1.0)
            if bound == "1":
                assert taken < len(big) // 2, f"{taken} bytes read while the fetch waited"
            else:
                assert taken == len(big)
            s.sendall(memoryview(big)[taken:])
            assert _answers_until_closed(s) == [7]
        assert b.alive()
    finally:
        b.close()
