"""Pure-Python twin of ``_crecords``: the reference implementation and the fallback without a compiler.

Same functions, same arguments, same results (column buffers), same ValueError on malformed input.
It loops per record, so it is only for correctness and for machines without the C build.
"""

from __future__ import annotations

from array import array
from typing import Any

MIN_RECORD_BYTES = 7
MIN_HEADER_BYTES = 2
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_MASK64 = (1 << 64) - 1


def _wrap64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


def _read_varint(buf: bytes, pos: int, end: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise ValueError(what)
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            raw &= (1 << bits) - 1
            value = (raw >> 1) ^ -(raw & 1)
            return value, pos
    raise ValueError(what)


def _bitmap(valid: list[bool]) -> bytes:
    out = bytearray((len(valid) + 7) // 8)
    for i, ok in enumerate(valid):
        if ok:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def decode_records(data: Any, count: int, base_offset: int, base_timestamp: int) -> tuple[Any, ...]:
    """Walk ``count`` records of an uncompressed records section into column buffers."""
    buf = bytes(data)
    end = len(buf)
    if end > _INT32_MAX:
        raise ValueError("records section larger than 2 GiB")
    if count < 0:
        raise ValueError("negative record count")
    if count > end // MIN_RECORD_BYTES:
        raise ValueError("record count larger than the records section can hold")
    offsets = array("q")
    timestamps = array("q")
    cols: dict[str, tuple[bytearray, array, list[bool]]] = {
        name: (bytearray(), array("i", [0]), []) for name in ("key", "value", "hvalue")
    }
    hkey_data = bytearray()
    hkey_offsets = array("i", [0])
    header_offsets = array("i", [0])
    pos = 0

    def field(name: str, rend: int) -> None:
        nonlocal pos
        data_, offs, valid = cols[name]
        length, pos = _read_varint(buf, pos, rend, 5, 32, "truncated length varint")
        if length < 0:  # Kafka reads any negative length as null
            valid.append(False)
        else:
            if length > rend - pos:
                raise ValueError("field length past end of record")
            data_ += buf[pos : pos + length]
            pos += length
            valid.append(True)
        offs.append(len(data_))

    for _ in range(count):
        rlen, pos = _read_varint(buf, pos, end, 5, 32, "truncated record length")
        if rlen < 0:
            raise ValueError("negative record length")
        if rlen > end - pos:
            raise ValueError("record length past end of batch")
        rend = pos + rlen
        if pos >= rend:
            raise ValueError("truncated record attributes")
        pos += 1
        ts_delta, pos = _read_varint(buf, pos, rend, 10, 64, "bad timestamp delta")
        offset_delta, pos = _read_varint(buf, pos, rend, 5, 32, "bad offset delta")
        offsets.append(_wrap64(base_offset + offset_delta))
        timestamps.append(_wrap64(base_timestamp + ts_delta))
        field("key", rend)
        field("value", rend)
        n_headers, pos = _read_varint(buf, pos, rend, 5, 32, "bad header count")
        if n_headers < 0:
            raise ValueError("negative header count")
        if n_headers > (rend - pos) // MIN_HEADER_BYTES:
            raise ValueError("header count past end of record")
        for _ in range(n_headers):
            klen, pos = _read_varint(buf, pos, rend, 5, 32, "bad header key length")
            if klen < 0:
                raise ValueError("null header key")
            if klen > rend - pos:
                raise ValueError("header key past end of record")
            raw_key = buf[pos : pos + klen]
            try:
                raw_key.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError("header key is not valid UTF-8") from None
            hkey_data += raw_key
            pos += klen
            hkey_offsets.append(len(hkey_data))
            field("hvalue", rend)
        header_offsets.append(len(hkey_offsets) - 1)
        if pos != rend:
            raise ValueError("record length does not match its fields")
    if pos != end:
        raise ValueError("bytes left after the last record")

    def validity(name: str) -> tuple[bytes | None, int]:
        valid = cols[name][2]
        nulls = valid.count(False)
        return (_bitmap(valid) if nulls else None), nulls

    kvalid, knull = validity("key")
    vvalid, vnull = validity("value")
    hvvalid, hvnull = validity("hvalue")
    return (
        offsets.tobytes(),
        timestamps.tobytes(),
        kvalid,
        cols["key"][1].tobytes(),
        bytes(cols["key"][0]),
        vvalid,
        cols["value"][1].tobytes(),
        bytes(cols["value"][0]),
        header_offsets.tobytes(),
        hkey_offsets.tobytes(),
        bytes(hkey_data),
        hvvalid,
        cols["hvalue"][1].tobytes(),
        bytes(cols["hvalue"][0]),
        knull,
        vnull,
        hvnull,
        len(hkey_offsets) - 1,
    )


def _write_uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _zz32(v: int) -> int:
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


def _zz64(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & _MASK64


class _Bin:
    """Element access to a binary/string Arrow array given as (validity, offsets, data, offset)."""

    def __init__(self, spec: tuple[Any, Any, Any, int] | None) -> None:
        self.present = spec is not None
        if spec is None:
            return
        valid, offs, data, off = spec
        if off < 0:
            raise ValueError("negative array offset")
        self.valid = None if valid is None else memoryview(valid).cast("B")
        self.offs = memoryview(offs).cast("B").cast("i")
        self.data = b"" if data is None else memoryview(data).cast("B")
        self.off = off

    def get(self, i: int) -> bytes | None:
        if not self.present:
            return None
        k = self.off + i
        if self.valid is not None:
            if k >> 3 >= len(self.valid):
                raise ValueError("inconsistent validity buffer")
            if not (self.valid[k >> 3] >> (k & 7)) & 1:
                return None
        if k + 1 >= len(self.offs):
            raise ValueError("inconsistent offsets buffer")
        a, b = self.offs[k], self.offs[k + 1]
        if a < 0 or b < a or b > len(self.data):
            raise ValueError("inconsistent offsets buffer")
        return bytes(self.data[a:b])


def _write_field(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)
    else:
        _write_uvarint(out, _zz32(len(value)))
        out += value


def encode_records(
    base_offset: int,
    base_timestamp: int,
    n: int,
    reserve: int,
    offsets: tuple[Any, int],
    timestamps: tuple[Any, int],
    key: tuple[Any, Any, Any, int] | None,
    value: tuple[Any, Any, Any, int] | None,
    headers: tuple[Any, Any, int, Any, Any] | None,
) -> tuple[bytearray, int]:
    """Write ``n`` records from column buffers into a bytearray that starts with ``reserve`` zero bytes.

    Returns it with the largest timestamp (-1 when there are no records).
    """
    if n < 0 or reserve < 0:
        raise ValueError("negative count or reserve")
    obuf, ooff = offsets
    tbuf, toff = timestamps
    o = memoryview(obuf).cast("B").cast("q")
    t = memoryview(tbuf).cast("B").cast("q")
    if ooff < 0 or toff < 0 or len(o) < ooff + n or len(t) < toff + n:
        raise ValueError("offset/timestamp buffers too short")
    kcol, vcol = _Bin(key), _Bin(value)
    lvalid = lo = None
    loff = 0
    hk = hv = _Bin(None)
    if headers is not None:
        lv, lob, loff, hks, hvs = headers
        lvalid = None if lv is None else memoryview(lv).cast("B")
        lo = memoryview(lob).cast("B").cast("i")
        hk, hv = _Bin(hks), _Bin(hvs)
        if not hk.present or loff < 0 or len(lo) < loff + n + 1:
            raise ValueError("header list buffers inconsistent")
    out = bytearray(reserve)
    max_ts = -1
    for i in range(n):
        od = o[ooff + i] - base_offset
        if od < _INT32_MIN or od > _INT32_MAX:
            raise ValueError("offset delta does not fit in int32")
        tsd = _wrap64(t[toff + i] - base_timestamp)
        max_ts = t[toff + i] if i == 0 else max(max_ts, t[toff + i])
        body = bytearray(b"\x00")
        _write_uvarint(body, _zz64(tsd))
        _write_uvarint(body, _zz32(od))
        _write_field(body, kcol.get(i))
        _write_field(body, vcol.get(i))
        h0 = h1 = 0
        if lo is not None:
            li = loff + i
            is_null = lvalid is not None and (li >> 3 >= len(lvalid) or not (lvalid[li >> 3] >> (li & 7)) & 1)
            if not is_null:
                h0, h1 = lo[li], lo[li + 1]
                if h0 < 0 or h1 < h0:
                    raise ValueError("inconsistent header list offsets")
        _write_uvarint(body, _zz32(h1 - h0))
        for j in range(h0, h1):
            hkey = hk.get(j)
            if hkey is None:
                raise ValueError("null header key")
            _write_field(body, hkey)
            _write_field(body, hv.get(j))
        if len(body) > _INT32_MAX:
            raise ValueError("record larger than 2 GiB")
        _write_uvarint(out, _zz32(len(body)))
        out += body
    return out, max_ts


class _Walk:
    """A walk's cursor over a records section, noting whether every varint it read was minimal."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.canonical = True

    def varint(self, pos: int, end: int, max_bytes: int, bits: int, what: str) -> tuple[int, int]:
        value, after = _read_varint(self.buf, pos, end, max_bytes, bits, what)
        zz = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
        if after - pos != max(1, (zz.bit_length() + 6) // 7):
            self.canonical = False
        return value, after

    def field(self, pos: int, rend: int) -> tuple[int, int, int]:
        """A length-prefixed field: (position past its length, length or -1 for null, next position)."""
        length, pos = self.varint(pos, rend, 5, 32, "truncated length varint")
        if length < 0:  # Kafka reads any negative length as null
            return pos, -1, pos
        if length > rend - pos:
            raise ValueError("field length past end of record")
        return pos, length, pos + length


def walk_records(data: Any, count: int, base_offset: int, base_timestamp: int) -> tuple[Any, ...]:
    """Walk ``count`` records of an uncompressed records section into positions, not copies:
    (rows, header_offsets, headers, header_count, canonical) with int64 rows of (offset, timestamp, key at,
    key length, value at, value length), int32 header list offsets and int64 headers of (key at,
    key length, value at, value length); a length of -1 is null; `canonical` says whether every
    varint was minimal."""
    buf = bytes(data)
    end = len(buf)
    if end > _INT32_MAX:
        raise ValueError("records section larger than 2 GiB")
    if count < 0:
        raise ValueError("negative record count")
    if count > end // MIN_RECORD_BYTES:
        raise ValueError("record count larger than the records section can hold")
    rows = array("q")
    headers = array("q")
    header_offsets = array("i", [0])
    w = _Walk(buf)
    pos = 0
    for _ in range(count):
        rlen, pos = w.varint(pos, end, 5, 32, "truncated record length")
        if rlen < 0:
            raise ValueError("negative record length")
        if rlen > end - pos:
            raise ValueError("record length past end of batch")
        rend = pos + rlen
        if pos >= rend:
            raise ValueError("truncated record attributes")
        pos += 1
        ts_delta, pos = w.varint(pos, rend, 10, 64, "bad timestamp delta")
        offset_delta, pos = w.varint(pos, rend, 5, 32, "bad offset delta")
        key_at, key_len, pos = w.field(pos, rend)
        value_at, value_len, pos = w.field(pos, rend)
        rows.extend((_wrap64(base_offset + offset_delta), _wrap64(base_timestamp + ts_delta),
                     key_at, key_len, value_at, value_len))
        n_headers, pos = w.varint(pos, rend, 5, 32, "bad header count")
        if n_headers < 0:
            raise ValueError("negative header count")
        if n_headers > (rend - pos) // MIN_HEADER_BYTES:
            raise ValueError("header count past end of record")
        for _ in range(n_headers):
            klen, pos = w.varint(pos, rend, 5, 32, "bad header key length")
            if klen < 0:
                raise ValueError("null header key")
            if klen > rend - pos:
                raise ValueError("header key past end of record")
            try:
                buf[pos : pos + klen].decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError("header key is not valid UTF-8") from None
            hkey_at = pos
            pos += klen
            hval_at, hval_len, pos = w.field(pos, rend)
            headers.extend((hkey_at, klen, hval_at, hval_len))
        header_offsets.append(len(headers) // 4)
        if pos != rend:
            raise ValueError("record length does not match its fields")
    if pos != end:
        raise ValueError("bytes left after the last record")
    return rows.tobytes(), header_offsets.tobytes(), headers.tobytes(), len(headers) // 4, w.canonical
