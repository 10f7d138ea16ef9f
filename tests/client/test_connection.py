"""The sans-IO core of the client transport: pipelining, ordering, and a stream that breaks.

Responses are encoded with the broker's own encoder and fed in chunks cut at seeded random
places (the seed is printed; PYLOG_TEST_SEED replays a run)."""

from __future__ import annotations

import os
import random
import struct

import pytest
from pylog.protocol import api
from pylog.protocol.api import ApiKey

from pylog.client.connection import ClientConnection
from pylog.client.errors import ConnectionBroken

SEED = int(os.environ.get("PYLOG_TEST_SEED", random.randrange(1 << 30)))


def _metadata_response(correlation_id: int, version: int, brokers: int) -> bytes:
    body = {"brokers": [{"node_id": i, "host": f"h{i}", "port": 9000 + i, "rack": None}
                        for i in range(brokers)],
            "cluster_id": "c", "controller_id": 0, "topics": []}
    return api.encode_response(ApiKey.METADATA, version, correlation_id, body)


def _feed_in_pieces(conn: ClientConnection, data: bytes, rng: random.Random) -> list:
    out = []
    pos = 0
    while pos < len(data):
        step = rng.randint(1, 300)
        out.extend(conn.receive_data(data[pos : pos + step]))
        pos += step
    return out


def test_pipelined_responses_come_back_in_request_order() -> None:
    print(f"seed {SEED}")
    rng = random.Random(SEED)
    conn = ClientConnection("t")
    sent = []
    for i in range(50):
        version = rng.choice([1, 9, 12])
        body = {"topics": [], "allow_auto_topic_creation": False}
        corr, parts = conn.send_request(ApiKey.METADATA, version, body)
        assert struct.unpack(">i", parts[0])[0] == sum(len(p) for p in parts[1:])
        sent.append((corr, version, i % 7))
    assert conn.in_flight == 50 and conn.in_flight_bytes > 0
    stream = b"".join(_metadata_response(corr, version, n) for corr, version, n in sent)
    got = _feed_in_pieces(conn, stream, rng)
    assert [(r.correlation_id, r.api_version, len(r.body.brokers)) for r in got] == sent
    assert conn.error is None and conn.in_flight == 0 and conn.in_flight_bytes == 0


def test_a_response_out_of_order_breaks_the_connection() -> None:
    conn = ClientConnection("t", peer="broker b")
    first, _ = conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    second, _ = conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    got = conn.receive_data(_metadata_response(second, 12, 1))
    assert got == [] and isinstance(conn.error, ConnectionBroken)
    assert str(conn.error) == f"broker b answered correlation id {second}, expected {first}"
    assert [p.correlation_id for p in conn.close(ConnectionBroken("x"))] == [first, second]
    with pytest.raises(ConnectionBroken, match="expected"):
        conn.send_request(ApiKey.METADATA, 12, {"topics": []})


def test_an_oversized_length_is_refused_before_anything_is_allocated() -> None:
    conn = ClientConnection("t", max_response_bytes=1 << 20, peer="broker b")
    conn.send_request(ApiKey.API_VERSIONS, 0, {})
    assert conn.receive_data(struct.pack(">i", 0x7FFFFFF0) + b"\x00" * 10) == []
    assert str(conn.error) == ("broker b announced a response of 2147483632 bytes, more than the 1048576 "
                               "this connection accepts")
    assert conn._reader.buffered_bytes < 1 << 20


def test_a_negative_length_or_a_body_that_does_not_parse_breaks_the_connection() -> None:
    conn = ClientConnection("t")
    conn.send_request(ApiKey.API_VERSIONS, 0, {})
    conn.receive_data(struct.pack(">i", -5))
    assert "broken frame: negative frame size -5" in str(conn.error)

    conn = ClientConnection("t")
    corr, _ = conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    garbage = struct.pack(">ii", 9, corr) + b"\xff\xff\xff\xff\x07"
    assert conn.receive_data(garbage) == []
    assert "sent a response to api 3 v12 that does not parse" in str(conn.error)


def test_responses_before_a_break_are_delivered() -> None:
    conn = ClientConnection("t")
    corr, _ = conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    got = conn.receive_data(_metadata_response(corr, 12, 2) + struct.pack(">i", -1))
    assert [r.correlation_id for r in got] == [corr] and conn.error is not None


def test_a_response_to_no_request_breaks_the_connection() -> None:
    conn = ClientConnection("t", peer="broker b")
    conn.receive_data(_metadata_response(0, 12, 1))
    assert str(conn.error) == "broker b sent a response to no request"


def test_an_abandoned_request_is_skipped_and_the_next_still_lines_up() -> None:
    conn = ClientConnection("t")
    a, _ = conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    b, _ = conn.send_request(ApiKey.METADATA, 12, {"topics": []})
    conn.abandon(a)
    got = conn.receive_data(_metadata_response(a, 12, 1) + _metadata_response(b, 12, 3))
    assert [(r.correlation_id, len(r.body.brokers)) for r in got] == [(b, 3)]


def test_in_flight_bytes_are_bounded_but_one_request_always_fits() -> None:
    conn = ClientConnection("t", max_in_flight_bytes=100)
    big = {"topics": [{"name": "x" * 200}]}
    out = conn.prepare_request(ApiKey.METADATA, 12, big)
    assert out.nbytes > 100 and conn.has_room(out.nbytes)  # nothing in flight: it may go
    conn.request_sent(out)
    assert not conn.has_room(10)
    conn.receive_data(_metadata_response(out.correlation_id, 12, 0))
    assert conn.has_room(100) and conn.in_flight_bytes == 0


def test_correlation_ids_wrap_at_int32() -> None:
    conn = ClientConnection("t")
    conn._next_id = 0x7FFFFFFF
    last, _ = conn.send_request(ApiKey.API_VERSIONS, 0, {})
    first, _ = conn.send_request(ApiKey.API_VERSIONS, 0, {})
    assert (last, first) == (0x7FFFFFFF, 0)
