"""FrameReader and the request / response headers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pylog.protocol.errors import FrameTooLarge, MalformedMessage, ProtocolError
from pylog.protocol.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    LARGE_FRAME_BYTES,
    SCRATCH_BYTES,
    FrameReader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    read_uvarint,
    write_uvarint,
)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_default_max_is_kafkas_socket_request_max_bytes() -> None:
    assert FrameReader().max_frame_bytes == DEFAULT_MAX_FRAME_BYTES == 100 * 1024 * 1024


def test_whole_frames_in_one_read() -> None:
    frames = FrameReader().feed(_frame(b"first") + _frame(b"") + _frame(b"third!"))
    assert [bytes(f) for f in frames] == [b"first", b"", b"third!"]
    assert all(isinstance(f, memoryview) for f in frames)


def test_byte_by_byte() -> None:
    dec = FrameReader()
    data = _frame(b"hello") + _frame(b"world")
    out = []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    assert [bytes(f) for f in out] == [b"hello", b"world"]
    assert dec.buffered_bytes == 0


@settings(max_examples=50, deadline=None, database=None)
@given(
    st.lists(st.binary(max_size=40), max_size=6),
    st.lists(st.integers(1, 30), min_size=1, max_size=20),
)
def test_any_chunking_gives_the_same_frames(bodies: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(_frame(b) for b in bodies)
    dec = FrameReader()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        out += [bytes(f) for f in dec.feed(stream[pos : pos + step])]
        pos += step
        i += 1
    assert out == bodies
    assert dec.buffered_bytes == 0


def test_mutable_input_is_copied() -> None:
    buf = bytearray(_frame(b"abc"))
    (frame,) = FrameReader().feed(buf)
    buf[4:7] = b"xyz"
    assert bytes(frame) == b"abc"


def test_too_large_is_rejected_on_the_prefix() -> None:
    dec = FrameReader(max_frame_bytes=10)
    assert dec.feed(_frame(b"x" * 10))[0] == b"x" * 10
    with pytest.raises(FrameTooLarge) as info:
        dec.feed(struct.pack(">i", 11))
    assert info.value.size == 11 and info.value.max_frame_bytes == 10
    assert isinstance(info.value, ProtocolError)


def test_frames_before_a_bad_prefix_are_served_first() -> None:
    dec = FrameReader(max_frame_bytes=100)
    frames = dec.feed(_frame(b"ok-1") + _frame(b"ok-2") + struct.pack(">i", 101) + b"zz")
    assert [bytes(f) for f in frames] == [b"ok-1", b"ok-2"]
    with pytest.raises(FrameTooLarge):
        dec.raise_pending()
    with pytest.raises(FrameTooLarge):
        dec.feed(_frame(b"late"))


def test_too_large_split_prefix() -> None:
    dec = FrameReader(max_frame_bytes=1000)
    assert dec.feed(b"\x7f\xff") == []
    with pytest.raises(FrameTooLarge):
        dec.feed(b"\xff\xff")


def test_negative_size_is_malformed() -> None:
    with pytest.raises(MalformedMessage):
        FrameReader().feed(b"\xff\xff\xff\xfe")


def test_partial_frame_is_buffered_only_as_received() -> None:
    dec = FrameReader()
    assert dec.feed(struct.pack(">i", 50_000_000) + b"abc") == []
    assert dec.buffered_bytes == 3


# --- FrameReader (asyncio.BufferedProtocol) -------------------------------------------------


def _read_in_steps(reader: FrameReader, stream: bytes, steps: list[int]) -> list[bytes]:
    """Feed ``stream`` as a socket would: each read fills at most ``step`` bytes of the buffer."""
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        buf = reader.get_buffer(-1)
        assert len(buf) > 0
        take = min(len(buf), steps[i % len(steps)], len(stream) - pos)
        buf[:take] = stream[pos : pos + take]
        out += [bytes(f) for f in reader.buffer_updated(take)]
        pos += take
        i += 1
    return out


@settings(max_examples=60, deadline=None, database=None)
@given(
    st.lists(
        st.one_of(st.binary(max_size=40), st.integers(LARGE_FRAME_BYTES - 8, 3 * SCRATCH_BYTES)),
        max_size=8,
    ),
    st.lists(st.integers(1, 2 * SCRATCH_BYTES), min_size=1, max_size=20),
)
def test_reader_any_reads_give_the_same_frames(specs: list[bytes | int], steps: list[int]) -> None:
    bodies = [s if isinstance(s, bytes) else bytes(range(251)) * (s // 251) for s in specs]
    stream = b"".join(_frame(b) for b in bodies)
    reader = FrameReader()
    assert _read_in_steps(reader, stream, steps) == bodies
    assert reader.buffered_bytes == 0


def test_reader_fills_a_large_frame_in_place_and_hands_it_out_writable() -> None:
    reader = FrameReader()
    body = bytes(range(256)) * 1024  # 256 KiB
    head = _frame(body)[: 4 + 1000]
    buf = reader.get_buffer(-1)
    buf[: len(head)] = head
    assert reader.buffer_updated(len(head)) == []
    rest = reader.get_buffer(-1)
    assert len(rest) == len(body) - 1000  # the socket now reads into the frame itself
    rest[:] = body[1000:]
    (frame,) = reader.buffer_updated(len(rest))
    assert bytes(frame) == body and not frame.readonly
    assert reader.buffered_bytes == 0 and len(reader.get_buffer(-1)) == SCRATCH_BYTES


def test_reader_small_frames_outlive_the_scratch() -> None:
    reader = FrameReader()
    first = reader.feed(_frame(b"one") + _frame(b"two"))
    reader.feed(_frame(b"x" * 1000) * 300)  # the scratch is reused many times over
    assert [bytes(f) for f in first] == [b"one", b"two"]


def test_reader_a_huge_announced_frame_costs_memory_only_as_it_arrives() -> None:
    def rss_kib() -> int:
        with open("/proc/self/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0])

    before = rss_kib()
    readers = [FrameReader() for _ in range(4)]
    for r in readers:
        assert r.feed(struct.pack(">i", 90_000_000) + b"abc") == []
        assert r.buffered_bytes == 3
    assert rss_kib() - before < 64 * 1024, "four 90 MB frames announced, nothing sent"


@pytest.mark.parametrize("client_id", ["", "kafka-python-3.0.12", None, "ü-ñ"])
@pytest.mark.parametrize("version", [1, 2])
def test_request_header_round_trip(client_id: str | None, version: int) -> None:
    raw = encode_request_header(18, 3, 12345, client_id, version) + b"BODY"
    header, pos = decode_request_header(memoryview(raw), 3 if version == 2 else None)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 12345)
    assert header.client_id == client_id
    assert header.header_version == version
    assert raw[pos:] == b"BODY"


def test_request_header_v0_has_no_client_id() -> None:
    assert encode_request_header(7, 0, 1, "ignored", 0) == struct.pack(">hhi", 7, 0, 1)


def test_client_id_is_int16_length_even_when_flexible() -> None:
    raw = encode_request_header(18, 4, 1, "ab", 2)
    assert raw == struct.pack(">hhih", 18, 4, 1, 2) + b"ab" + b"\x00"


def test_request_header_skips_unknown_tagged_fields() -> None:
    raw = struct.pack(">hhih", 3, 12, 9, 1) + b"c" + b"\x02" + b"\x05\x02hi" + b"\x09\x00" + b"BODY"
    header, pos = decode_request_header(memoryview(raw), 9)
    assert header.client_id == "c" and raw[pos:] == b"BODY"


@pytest.mark.parametrize(
    "raw",
    [b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00", b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x09ab", b""],
)
def test_truncated_request_header(raw: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode_request_header(memoryview(raw), None)


@pytest.mark.parametrize("version", [0, 1])
def test_response_header(version: int) -> None:
    raw = encode_response_header(-5, version)
    assert len(raw) == 4 + version
    assert decode_response_header(memoryview(raw + b"X"), version) == (-5, 4 + version)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**28, 2**32 - 1])
def test_uvarint_round_trip(value: int) -> None:
    raw = write_uvarint(value)
    assert read_uvarint(raw, 0, len(raw)) == (value, len(raw))


def test_uvarint_longer_than_five_bytes() -> None:
    with pytest.raises(MalformedMessage):
        read_uvarint(b"\xff" * 10, 0, 10)
    with pytest.raises(MalformedMessage):
        read_uvarint(b"\x80\x80", 0, 2)


@pytest.mark.parametrize("client_id", ["abc", None])
def test_hand_written_headers_match_kafkas_header_schema(client_id: str | None) -> None:
    from pylog.protocol.api import MESSAGES, encode_body

    spec = MESSAGES["RequestHeader"]
    body = {"request_api_key": 3, "request_api_version": 12, "correlation_id": 5, "client_id": client_id}
    for version in (1, 2):
        expected = encode_request_header(3, 12, 5, client_id, version)
        assert b"".join(encode_body(spec, version, body)) == expected
    spec = MESSAGES["ResponseHeader"]
    for version in (0, 1):
        expected = encode_response_header(5, version)
        assert b"".join(encode_body(spec, version, {"correlation_id": 5})) == expected
