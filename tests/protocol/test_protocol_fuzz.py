"""Hostile input: random and mutated bytes raise only ProtocolError subclasses, memory stays bounded."""

from __future__ import annotations

import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_strategy
from pylog.protocol.api import (
    MESSAGES,
    decode_body,
    decode_request,
    decode_response,
    encode_request,
    supported_versions,
)
from pylog.protocol.errors import FrameTooLarge, MalformedMessage, ProtocolError
from pylog.protocol.framing import FrameReader
from pylog.protocol.schema import MessageSpec

_FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _try_request(raw: bytes) -> None:
    try:
        decode_request(memoryview(raw))
    except ProtocolError:
        pass


@_FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_as_request(raw: bytes) -> None:
    _try_request(raw)


@_FUZZ
@given(
    st.sampled_from(sorted(supported_versions().items())),
    st.integers(0, 40),
    st.binary(max_size=200),
)
def test_random_bodies_behind_a_valid_header(key_range: Any, offset: int, tail: bytes) -> None:
    key, (lo, hi) = key_range
    version = lo + offset % (hi - lo + 1)
    head = struct.pack(">hhih", key, version, 1, 1) + b"c"
    _try_request(head + b"\x00" + tail)
    _try_request(head + tail)


_REQUEST_CASES = sorted((k, v) for k, (lo, hi) in supported_versions().items() for v in (lo, hi))


@st.composite
def _valid_request_frames(draw: st.DrawFn) -> bytes:
    key, version = draw(st.sampled_from(_REQUEST_CASES))
    spec = request_spec(key)
    body = draw(message_strategy(spec, version))
    return encode_request(key, version, 7, "fuzz", body)[4:]


def request_spec(key: int) -> MessageSpec:
    return next(m for m in MESSAGES.values() if m.kind == "request" and m.api_key == key)


@st.composite
def _mutations(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(_valid_request_frames()))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        if not raw:
            break
        i = draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            raw[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "truncate":
            del raw[i:]
        elif op == "insert":
            raw[i:i] = draw(st.binary(min_size=1, max_size=4))
        else:
            del raw[i : i + draw(st.integers(1, 4))]
    return bytes(raw)


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_mutations())
def test_mutated_valid_requests(raw: bytes) -> None:
    _try_request(raw)


@_FUZZ
@given(st.sampled_from(sorted(supported_versions())), st.binary(max_size=200))
def test_random_responses(key: int, raw: bytes) -> None:
    lo, hi = supported_versions()[key]
    for version in {lo, hi}:
        try:
            decode_response(key, version, memoryview(raw))
        except ProtocolError:
            pass


@_FUZZ
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_frame_decoder_random_stream(chunks: list[bytes]) -> None:
    dec = FrameReader(max_frame_bytes=4096)
    try:
        for c in chunks:
            for frame in dec.feed(c):
                assert len(frame) <= 4096
                _try_request(bytes(frame))
            assert dec.buffered_bytes <= 4096 + 4
    except ProtocolError:
        pass


def _peak_bytes(fn: Any) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_two_gib_prefix_rejected_without_allocation() -> None:
    reader = FrameReader()  # its read buffer is the connection's, whatever arrives

    def run() -> None:
        with pytest.raises(FrameTooLarge):
            reader.feed(b"\x7f\xff\xff\xff" + b"x" * 100)

    assert _peak_bytes(run) < 64 * 1024


def test_large_allowed_prefix_buffers_only_what_arrived() -> None:
    dec = FrameReader(max_frame_bytes=2**31 - 1)

    def run() -> None:
        assert dec.feed(b"\x7f\xff\xff\xff" + b"x" * 1000) == []

    assert _peak_bytes(run) < 64 * 1024
    assert dec.buffered_bytes == 1000


@pytest.mark.parametrize(
    ("name", "version", "payload"),
    [
        # Metadata v4: topics array count 2**31-1 in a 4-byte body
        ("MetadataRequest", 4, struct.pack(">i", 0x7FFFFFFF)),
        # Metadata v9 (flexible): compact array count from a 5-byte varint
        ("MetadataRequest", 9, b"\xff\xff\xff\xff\x07"),
        # Produce v3: a records length of 2 GiB - 1
        (
            "ProduceRequest",
            3,
            b"\xff\xff" + struct.pack(">hii", 1, 0, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, 0x7FFFFFFF),
        ),
        # Fetch v12: a tagged-field count far beyond the bytes left
        (
            "FetchRequest",
            12,
            struct.pack(">iiiibii", -1, 0, 0, 0, 0, 0, 0) + b"\x01\x01\x01\xff\xff\xff\xff\x07",
        ),
        # JoinGroup v0: a protocols array count of 2**31 - 16
        (
            "JoinGroupRequest",
            0,
            b"\x00\x01g" + struct.pack(">i", 1) + b"\x00\x01m" + b"\x00\x01c" + struct.pack(">i", 0x7FFFFFF0),
        ),
    ],
)
def test_huge_counts_and_lengths_rejected_before_allocation(name: str, version: int, payload: bytes) -> None:
    spec = MESSAGES[name]

    def run() -> None:
        with pytest.raises(MalformedMessage):
            decode_body(spec, version, memoryview(payload))

    run()  # compiles the codec for this version outside the measurement
    assert _peak_bytes(run) < 64 * 1024


def test_endless_varint_is_rejected() -> None:
    with pytest.raises(MalformedMessage):
        decode_body(MESSAGES["MetadataRequest"], 12, memoryview(b"\xff" * 1000))


def test_invalid_utf8_is_malformed() -> None:
    raw = struct.pack(">hhih", 12, 0, 1, 1) + b"c" + b"\x00\x02\xff\xfe" + struct.pack(">i", 1) + b"\x00\x01m"
    with pytest.raises(MalformedMessage):
        decode_request(memoryview(raw))
