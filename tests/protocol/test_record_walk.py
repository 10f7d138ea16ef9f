"""walk_records: the C walk and its pure-Python twin give the same positions, lengths and flags, or
the same MalformedRecords, for any records section; the positions are where decode_records finds
the bytes. walk_views (format 2's columns: binary_view views) agrees between C and Python too, and
its views name the walked bytes."""

from __future__ import annotations

import itertools
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pylog.protocol.errors import MalformedRecords
from pylog.protocol.records import C_IMPL, PYTHON_IMPL, decode_records
from pylog.protocol.records.batch import RecordWalk, walk_records, walk_views, walk_views_many

from pylog.model import BINARY_VIEW_INLINE

IMPLS = (C_IMPL, PYTHON_IMPL)
BASE_OFFSET, BASE_TS = 1 << 40, 1_700_000_000_000


def uvarint(v: int, pad: int = 0) -> bytes:
    """`v` as a varint, `pad` continuation bytes longer than it needs (legal, not minimal)."""
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    if pad:
        out.append(v | 0x80)
        out += b"\x80" * (pad - 1) + b"\x00"
    else:
        out.append(v)
    return bytes(out)


def zz(v: int, bits: int) -> int:
    return ((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1)


@st.composite
def sections(draw) -> tuple[bytes, int, bool]:
    """A records section of random records (nulls, headers, wide deltas), some varints padded;
    returns it, its record count and whether every varint is minimal."""
    canonical = True

    def var(v: int, bits: int = 32) -> bytes:
        nonlocal canonical
        max_pad = (10 if bits == 64 else 5) - len(uvarint(zz(v, bits)))
        pad = draw(st.sampled_from([0, 0, 0, 0, 0, 0, min(1, max_pad), max_pad]))
        canonical &= pad == 0
        return uvarint(zz(v, bits), pad)

    def field(value: bytes | None) -> bytes:
        if value is None:
            return var(draw(st.sampled_from([-1, -1, -2, -(1 << 31)])))
        return var(len(value)) + value

    blob = st.one_of(st.none(), st.binary(max_size=40))
    out = bytearray()
    n = draw(st.integers(0, 6))
    for i in range(n):
        body = bytearray(b"\x00")
        body += var(draw(st.sampled_from([0, 1, -1, 1 << 40, -(1 << 63), (1 << 63) - 1])), 64)
        body += var(draw(st.sampled_from([i, 0, -1, (1 << 31) - 1, -(1 << 31)])))
        body += field(draw(blob)) + field(draw(blob))
        headers = draw(st.lists(st.tuples(st.text(max_size=6), blob), max_size=3))
        body += var(len(headers))
        for k, v in headers:
            key = k.encode()
            body += var(len(key)) + key + field(v)
        out += var(len(body)) + body
    return bytes(out), n, canonical


def outcome(data: bytes, count: int, impl: object) -> tuple[object, ...] | str:
    try:
        w = walk_records(data, count, BASE_OFFSET, BASE_TS, impl=impl)  # type: ignore[arg-type]
    except MalformedRecords as exc:
        return f"malformed: {exc}"
    return (w.rows.tolist(), w.header_offsets.tolist(), w.headers.tolist(), w.canonical)


def value_at(data: bytes, at: int, length: int) -> bytes | None:
    return None if length < 0 else data[at:at + length]


def check_against_decode(data: bytes, count: int, w: RecordWalk) -> None:
    """The walk's positions hold exactly what decode_records copies out."""
    batch = decode_records(data, count, BASE_OFFSET, BASE_TS)
    rec = {name: batch.column(name).to_pylist() for name in ("offset", "key", "value", "headers")}
    rows = w.rows.tolist()
    assert [r[0] for r in rows] == rec["offset"]
    assert [r[1] for r in rows] == batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert [value_at(data, r[2], r[3]) for r in rows] == rec["key"]
    assert [value_at(data, r[4], r[5]) for r in rows] == rec["value"]
    hoff = w.header_offsets.tolist()
    hs = w.headers.tolist()
    got = [[{"key": data[k:k + kl].decode(), "value": value_at(data, v, vl)} for k, kl, v, vl in hs[a:b]]
           for a, b in itertools.pairwise(hoff)]
    assert got == rec["headers"]


def test_the_accelerator_has_the_walk() -> None:
    assert C_IMPL is not None and hasattr(C_IMPL, "walk_records")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections())
def test_both_walks_agree_and_point_at_the_decoded_bytes(case: tuple[bytes, int, bool]) -> None:
    data, count, canonical = case
    c, py = (outcome(data, count, impl) for impl in IMPLS)
    assert c == py
    assert not isinstance(c, str), c
    assert c[3] is canonical
    check_against_decode(data, count, walk_records(data, count, BASE_OFFSET, BASE_TS, impl=C_IMPL))


@st.composite
def damaged(draw) -> tuple[bytes, int]:
    data, count, _ = draw(sections())
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "count"]))
        if kind == "flip" and buf:
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0xC3, buf[i] ^ 1]))
        elif kind == "truncate" and buf:
            del buf[draw(st.integers(0, len(buf) - 1)):]
        elif kind == "insert":
            i = draw(st.integers(0, len(buf)))
            buf[i:i] = draw(st.binary(min_size=1, max_size=6))
        else:
            count = draw(st.sampled_from([count + 1, max(count - 1, 0), -1, 1 << 40]))
    return bytes(buf), count


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_both_walks_agree_on_damaged_sections(case: tuple[bytes, int]) -> None:
    data, count = case
    c, py = (outcome(data, count, impl) for impl in IMPLS)
    assert c == py
    if isinstance(c, str):  # the decoder refuses the same input with the same reason
        with pytest.raises(MalformedRecords) as exc:
            decode_records(data, count, BASE_OFFSET, BASE_TS, impl=C_IMPL)
        assert c == f"malformed: {exc.value}"
    else:
        check_against_decode(data, count, walk_records(data, count, BASE_OFFSET, BASE_TS, impl=C_IMPL))


@pytest.mark.parametrize("impl", IMPLS, ids=["c", "python"])
@pytest.mark.parametrize(("data", "count", "message"), [
    (b"\xff\xff\xff\xff\xff\xff", 0, "bytes left after the last record"),
    (b"\x0e\x00\x00\x00\x01\x01\x00" + b"\x00" * 8, 1, "record length does not match its fields"),
    (b"\x0e\x00\x00\x00\x01\x01\x00", 1, "record length past end of batch"),
    (b"\x0e\x00\x00\x00\x7f\x01\x00", 1, "record length past end of batch"),
    (b"\x0c\x00\x00\x00\x40\x01\x00", 1, "field length past end of record"),
    (b"\x12\x00\x00\x00\x01\x01\x02\x02\xc3\x01", 1, "header key is not valid UTF-8"),
    (b"\x0e\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00\x00", 1, "bad timestamp delta"),
    (b"\x00" * 7, 2, "record count larger than the records section can hold"),
])
def test_malformed_sections_are_refused_with_the_reason(impl: object, data: bytes, count: int,
                                                        message: str) -> None:
    with pytest.raises(MalformedRecords, match=message):
        walk_records(data, count, 0, 0, impl=impl)  # type: ignore[arg-type]


def views_outcome(data: bytes, count: int, impl: object, base_offset: int = BASE_OFFSET,
                  base_timestamp: int = BASE_TS) -> tuple[object, ...] | str:
    try:
        w = walk_views(data, count, base_offset, base_timestamp, impl=impl)  # type: ignore[arg-type]
    except MalformedRecords as exc:
        return f"malformed: {exc}"
    return tuple(None if v is None else v.tolist() if hasattr(v, "tolist") else v for v in w)


def view_value(data: bytes, view: list[int]) -> bytes:
    """The bytes a binary_view names: inline, or buffer 0 (the section) at its offset."""
    raw = struct.pack("<4i", *view)
    length = view[0]
    if length <= BINARY_VIEW_INLINE:
        assert raw[4 + length:] == bytes(12 - length)  # zero padded
        return raw[4:4 + length]
    assert view[2] == 0 and raw[4:8] == data[view[3]:view[3] + 4]  # the prefix
    return data[view[3]:view[3] + length]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(sections().map(lambda s: s[:2]), damaged()))
def test_both_view_walks_agree_and_name_the_walked_bytes(case: tuple[bytes, int]) -> None:
    data, count = case
    c, py = (views_outcome(data, count, impl) for impl in IMPLS)
    assert c == py
    walked = outcome(data, count, C_IMPL)
    if isinstance(c, str):  # refused as walk_records refuses it
        assert c == walked
        return
    assert not isinstance(walked, str)
    w = walk_views(data, count, BASE_OFFSET, BASE_TS, impl=C_IMPL)
    rows, hoff, headers, canonical = walked
    assert w.offset.tolist() == [r[0] for r in rows] and w.timestamp.tolist() == [r[1] for r in rows]
    assert w.header_offsets.tolist() == hoff and w.canonical is canonical
    for views, valid, pairs in ((w.key, w.key_valid, [(r[2], r[3]) for r in rows]),
                                (w.value, w.value_valid, [(r[4], r[5]) for r in rows]),
                                (w.header_key, None, [(h[0], h[1]) for h in headers]),
                                (w.header_value, w.header_value_valid, [(h[2], h[3]) for h in headers])):
        expected = [value_at(data, at, length) for at, length in pairs]
        present = [e is not None for e in expected]
        assert (valid is None and all(present)) or (valid is not None and valid.tolist() == present)
        assert [view_value(data, v) if p else v for v, p in zip(views.tolist(), present)] == [
            e if e is not None else [0, 0, 0, 0] for e in expected]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(sections().map(lambda s: s[:2]), damaged()), min_size=0, max_size=4))
def test_both_many_walks_agree_and_are_the_single_walks_joined(cases: list[tuple[bytes, int]]) -> None:
    args = ([d for d, _ in cases], [c for _, c in cases], [BASE_OFFSET + 100 * i for i in range(len(cases))],
            [BASE_TS + i for i in range(len(cases))])
    c, py = (walk_views_many(*args, impl=impl) for impl in IMPLS)  # type: ignore[arg-type]
    assert [None if v is None else v.tolist() if hasattr(v, "tolist") else v for v in c[0]] == [
        None if v is None else v.tolist() if hasattr(v, "tolist") else v for v in py[0]]
    assert c[1:] == py[1:]
    singles = [views_outcome(d, n, C_IMPL, base, ts) for (d, n), base, ts in zip(cases, args[2], args[3])]
    walked = len(c[1])
    assert all(not isinstance(s, str) for s in singles[:walked])
    if walked < len(cases):
        assert singles[walked] == f"malformed: {c[2]}"
    else:
        assert c[2] is None
    w = c[0]
    assert w.offset.tolist() == [o for s in singles[:walked] for o in s[0]]  # type: ignore[index]
    values = [v for s in singles[:walked] for v in s[4]]  # type: ignore[index]
    ordinals = [i for i, s in enumerate(singles[:walked]) for _ in s[4]]  # type: ignore[index]
    assert w.value.tolist() == [v if v[0] <= BINARY_VIEW_INLINE else [v[0], v[1], i, v[3]]
                                for v, i in zip(values, ordinals)]
