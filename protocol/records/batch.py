"""RecordBatch v2 <-> ``pa.RecordBatch`` with RECORD_SCHEMA.

The record walk is done by an implementation module (``_crecords`` in C, or its pure-Python twin
``_pyrecords``) that turns the varint layout into column buffers and back; this module handles
the batch header, CRC and compression, and wraps the buffers as Arrow arrays without copying.
"""

from __future__ import annotations

import os
import struct
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.model import (
    BINARY_VIEW_INLINE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_STRUCT_TYPE,
    HEADERS_TYPE,
    NO_TIMESTAMP,
    RECORD_SCHEMA,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)

from ..errors import CorruptRecordBatch, MalformedRecords
from . import _pyrecords
from .compression import C_LZ4_FRAMES, LZ4, batch_codec, codec_id, compress, decompress_records
from .header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    compute_crc,
    parse_header,
)
from .header import verify_crc as _check_crc

_INT64 = pa.int64()
_TIMESTAMP_MS = pa.timestamp("ms")
_BINARY = pa.binary()
_STRING = pa.string()

DEFAULT_MAX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024

try:
    from . import _crecords as _c_impl  # type: ignore[attr-defined]
except ImportError:  # no compiler at install time
    _c_impl = None

PYTHON_IMPL: ModuleType = _pyrecords
C_IMPL: ModuleType | None = _c_impl
_impl: ModuleType = (
    _c_impl if (_c_impl is not None and os.environ.get("PYLOG_PURE_PYTHON") != "1") else _pyrecords
)
IMPLEMENTATION = "c" if _impl is _c_impl else "python"
_import_batch = pa.RecordBatch._import_from_c
_c_arrow = getattr(_c_impl, "decode_records_arrow", None)  # absent from an accelerator built before it
_c_walk = getattr(_c_impl, "walk_records", None)
_c_walk_views = getattr(_c_impl, "walk_views", None)  # absent from an accelerator built before it
_c_walk_views_many = getattr(_c_impl, "walk_views_many", None)
_c_lz4_arrow = getattr(_c_impl, "decode_lz4_records_arrow", None) if C_LZ4_FRAMES else None
_LZ4FrameError: type[Exception] = getattr(_c_impl, "LZ4FrameError", ValueError)


class DecodedBatch(NamedTuple):
    header: BatchHeader
    records: pa.RecordBatch


def _buf(obj: Any) -> pa.Buffer | None:
    return None if obj is None else pa.py_buffer(obj)


def records_from_buffers(parts: tuple[Any, ...], n: int) -> pa.RecordBatch:
    """Wrap the implementation's column buffers as a RECORD_SCHEMA batch (zero-copy)."""
    (off, ts, kv, ko, kd, vv, vo, vd, ho, hko, hkd, hvv, hvo, hvd, knull, vnull, hvnull, nh) = parts
    from_buffers = pa.Array.from_buffers
    hkey = from_buffers(_STRING, nh, [None, _buf(hko), _buf(hkd)], null_count=0)
    hval = from_buffers(_BINARY, nh, [_buf(hvv), _buf(hvo), _buf(hvd)], null_count=hvnull)
    hstruct = from_buffers(HEADER_STRUCT_TYPE, nh, [None], null_count=0, children=[hkey, hval])
    columns = [
        from_buffers(_INT64, n, [None, _buf(off)], null_count=0),
        from_buffers(_TIMESTAMP_MS, n, [None, _buf(ts)], null_count=0),
        from_buffers(_BINARY, n, [_buf(kv), _buf(ko), _buf(kd)], null_count=knull),
        from_buffers(_BINARY, n, [_buf(vv), _buf(vo), _buf(vd)], null_count=vnull),
        from_buffers(HEADERS_TYPE, n, [None, _buf(ho)], null_count=0, children=[hstruct]),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)


def decode_records(
    data: Any, count: int, base_offset: int, base_timestamp: int, *, impl: ModuleType | None = None
) -> pa.RecordBatch:
    """Decode an uncompressed records section (the bytes after the 61-byte header); records that
    do not parse raise MalformedRecords."""
    mod = impl or _impl
    try:
        if mod is _c_impl and _c_arrow is not None:  # one C data interface import, not a dozen from_buffers
            return _c_arrow(data, count, base_offset, base_timestamp, _import_batch, RECORD_SCHEMA)
        parts = mod.decode_records(data, count, base_offset, base_timestamp)
    except ValueError as exc:
        raise MalformedRecords(str(exc)) from None
    return records_from_buffers(parts, count)


class RecordWalk(NamedTuple):
    """Where each record's fields lie in an uncompressed records section (no bytes copied).

    `rows` is (n, 6) int64: offset, timestamp, key position, key length, value position, value
    length; `headers` is (header count, 4) int64: key position, key length, value position, value
    length; a length of -1 is null. `header_offsets` (int32, n + 1) delimits each record's headers.
    `canonical`: every varint was the minimal encoding of its value."""

    rows: np.ndarray
    header_offsets: np.ndarray
    headers: np.ndarray
    canonical: bool


def walk_records(
    data: Any, count: int, base_offset: int, base_timestamp: int, *, impl: ModuleType | None = None
) -> RecordWalk:
    """The positions and lengths of the records of an uncompressed records section, checked as
    `decode_records` checks them (records that do not parse raise MalformedRecords)."""
    mod = impl or _impl
    walk = _c_walk if mod is _c_impl and _c_walk is not None else _pyrecords.walk_records
    try:
        rows, hoff, headers, nh, canonical = walk(data, count, base_offset, base_timestamp)
    except ValueError as exc:
        raise MalformedRecords(str(exc)) from None
    return RecordWalk(np.frombuffer(rows, np.int64, 6 * count).reshape(count, 6),
                      np.frombuffer(hoff, np.int32, count + 1),
                      np.frombuffer(headers, np.int64, 4 * nh).reshape(nh, 4), canonical)


class ViewWalk(NamedTuple):
    """A records section's columns as a format 2 segment stores them, from one walk: offsets and
    timestamps (int64), and per key, value, header key and header value an Arrow binary_view view
    ((n, 4) int32: length, then the value inline when at most `BINARY_VIEW_INLINE` bytes, else a
    4-byte prefix, buffer 0 and the value's position in the section) with its validity (bool, None
    when none is null; a null's view is all zero). `canonical` as in RecordWalk."""

    offset: np.ndarray
    timestamp: np.ndarray
    key: np.ndarray
    key_valid: np.ndarray | None
    value: np.ndarray
    value_valid: np.ndarray | None
    header_offsets: np.ndarray  # int32, n + 1, from 0
    header_key: np.ndarray
    header_value: np.ndarray
    header_value_valid: np.ndarray | None
    canonical: bool


def binary_views(raw: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """binary_view views ((n, 4) int32) of values of `lengths` (-1: null) at byte positions `at`
    of `raw` (uint8); long values point into buffer 0 at their position (numpy, no record loop)."""
    n = len(at)
    out = np.zeros((n, 16), np.uint8)
    if n == 0:
        return out.view(np.int32)
    size = np.maximum(lengths, 0)
    cols = np.arange(BINARY_VIEW_INLINE, dtype=np.int64)
    idx = np.minimum(at[:, None] + cols, max(len(raw) - 1, 0))
    take = cols < np.minimum(size, BINARY_VIEW_INLINE)[:, None]
    if len(raw):
        out[:, 4:] = np.where(take, raw[idx], 0)
    words = out.view(np.int32)
    words[:, 0] = size
    long = size > BINARY_VIEW_INLINE
    words[long, 2] = 0
    words[long, 3] = at[long]
    return words


def _valid(lengths: np.ndarray) -> np.ndarray | None:
    valid = lengths >= 0
    return None if valid.all() else valid


def _views_twin(data: Any, count: int, base_offset: int, base_timestamp: int) -> ViewWalk:
    """The pure-Python walk_views: the Python walk, then the views with numpy."""
    w = walk_records(data, count, base_offset, base_timestamp, impl=_pyrecords)
    raw = np.frombuffer(data, np.uint8)
    rows, headers = w.rows, w.headers
    return ViewWalk(rows[:, 0].copy(), rows[:, 1].copy(),
                    binary_views(raw, rows[:, 2], rows[:, 3]), _valid(rows[:, 3]),
                    binary_views(raw, rows[:, 4], rows[:, 5]), _valid(rows[:, 5]),
                    w.header_offsets, binary_views(raw, headers[:, 0], headers[:, 1]),
                    binary_views(raw, headers[:, 2], headers[:, 3]), _valid(headers[:, 3]), w.canonical)


def _bools(buf: Any, n: int) -> np.ndarray | None:
    return None if buf is None else np.frombuffer(buf, np.bool_, n)


def _many_twin(raws: list[Any], counts: list[int], base_offsets: list[int],
               base_timestamps: list[int]) -> tuple[ViewWalk, list[bool], str | None]:
    """The pure-Python walk_views_many: walk_views of each batch, concatenated."""
    walked: list[ViewWalk] = []
    error = None
    for raw, count, base, ts in zip(raws, counts, base_offsets, base_timestamps):
        try:
            walked.append(_views_twin(raw, count, base, ts))
        except MalformedRecords as exc:
            error = str(exc)
            break
    walks = walked or [_views_twin(b"", 0, 0, 0)]
    sizes = [len(w.offset) for w in walks]
    hsizes = [len(w.header_key) for w in walks]

    def views(name: str, lengths: list[int]) -> np.ndarray:
        out = np.concatenate([getattr(w, name) for w in walks])
        ordinal = np.repeat(np.arange(len(walks), dtype=np.int32), lengths)
        long = out[:, 0] > BINARY_VIEW_INLINE
        out[long, 2] = ordinal[long]
        return out

    def valid(name: str, lengths: list[int]) -> np.ndarray | None:
        parts = [getattr(w, name) for w in walks]
        if all(v is None for v in parts):
            return None
        return np.concatenate([np.ones(n, bool) if v is None else v for v, n in zip(parts, lengths)])

    hbase = np.cumsum([0, *hsizes[:-1]])
    header_offsets = np.concatenate([np.zeros(1, np.int32)] + [
        (w.header_offsets[1:] + b).astype(np.int32) for w, b in zip(walks, hbase)])
    canonical = [w.canonical for w in walked]
    walk = ViewWalk(np.concatenate([w.offset for w in walks]), np.concatenate([w.timestamp for w in walks]),
                    views("key", sizes), valid("key_valid", sizes), views("value", sizes),
                    valid("value_valid", sizes), header_offsets, views("header_key", hsizes),
                    views("header_value", hsizes), valid("header_value_valid", hsizes), all(canonical))
    return walk, canonical, error


def walk_views_many(
    raws: list[Any], counts: list[int], base_offsets: list[int], base_timestamps: list[int], *,
    impl: ModuleType | None = None,
) -> tuple[ViewWalk, list[bool], str | None]:
    """`walk_views` of consecutive Kafka batches' uncompressed records at once (a follower's
    fetch): their columns concatenated, a long view's buffer index the ordinal of its batch,
    header offsets running on. Returns the columns, each walked batch's canonical flag and None,
    or the MalformedRecords message of the first batch that does not parse (the columns then hold
    the batches before it)."""
    mod = impl or _impl
    if mod is not _c_impl or _c_walk_views_many is None:
        return _many_twin(raws, counts, base_offsets, base_timestamps)
    off, ts, kv, kval, vv, vval, hoff, hkv, hvv, hvval, nh, canonical, error = _c_walk_views_many(
        raws, counts, base_offsets, base_timestamps)
    n = len(off) // 8
    walk = ViewWalk(np.frombuffer(off, np.int64, n), np.frombuffer(ts, np.int64, n),
                    np.frombuffer(kv, np.int32, 4 * n).reshape(n, 4), _bools(kval, n),
                    np.frombuffer(vv, np.int32, 4 * n).reshape(n, 4), _bools(vval, n),
                    np.frombuffer(hoff, np.int32, n + 1),
                    np.frombuffer(hkv, np.int32, 4 * nh).reshape(nh, 4),
                    np.frombuffer(hvv, np.int32, 4 * nh).reshape(nh, 4), _bools(hvval, nh), all(canonical))
    return walk, canonical, error


def walk_views(
    data: Any, count: int, base_offset: int, base_timestamp: int, *, impl: ModuleType | None = None
) -> ViewWalk:
    """The format 2 columns of an uncompressed records section (`ViewWalk`), checked as
    `walk_records` checks them (records that do not parse raise MalformedRecords). The C walk
    builds the views as it goes; the pure-Python twin computes the same with numpy."""
    mod = impl or _impl
    if mod is not _c_impl or _c_walk_views is None:
        return _views_twin(data, count, base_offset, base_timestamp)
    try:
        off, ts, kv, kval, vv, vval, hoff, hkv, hvv, hvval, nh, canonical = _c_walk_views(
            data, count, base_offset, base_timestamp)
    except ValueError as exc:
        raise MalformedRecords(str(exc)) from None
    return ViewWalk(np.frombuffer(off, np.int64, count), np.frombuffer(ts, np.int64, count),
                    np.frombuffer(kv, np.int32, 4 * count).reshape(count, 4), _bools(kval, count),
                    np.frombuffer(vv, np.int32, 4 * count).reshape(count, 4), _bools(vval, count),
                    np.frombuffer(hoff, np.int32, count + 1),
                    np.frombuffer(hkv, np.int32, 4 * nh).reshape(nh, 4),
                    np.frombuffer(hvv, np.int32, 4 * nh).reshape(nh, 4), _bools(hvval, nh), canonical)


def decode_section(
    codec: int,
    data: Any,
    count: int,
    base_offset: int,
    base_timestamp: int,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    *,
    impl: ModuleType | None = None,
) -> pa.RecordBatch:
    """Decode a records section as the batch's `codec` (attribute bits) compressed it: a section
    that does not decompress raises CorruptRecordBatch (RecordBatchTooLarge past the bound),
    records that do not parse MalformedRecords. An lz4 frame from Kafka's clients goes through
    the C accelerator's streamed walk (no whole decompressed copy); same results and errors."""
    codec = batch_codec(codec)
    mod = impl or _impl
    if codec == LZ4 and mod is _c_impl and _c_lz4_arrow is not None:
        try:
            got = _c_lz4_arrow(data, count, base_offset, base_timestamp, max_uncompressed_bytes,
                               _import_batch, RECORD_SCHEMA)
        except _LZ4FrameError as exc:
            raise CorruptRecordBatch(f"lz4 decompression failed: {exc}") from None
        except ValueError as exc:
            raise MalformedRecords(str(exc)) from None
        if got is not None:
            return got
    if codec:
        data = decompress_records(codec, data, max_uncompressed_bytes, accelerated=mod is _c_impl)
    return decode_records(data, count, base_offset, base_timestamp, impl=mod)


def decode_batch(
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    impl: ModuleType | None = None,
) -> DecodedBatch:
    """Decode the batch at the start of ``buf`` into its header and a RECORD_SCHEMA batch.

    ``offset`` and ``timestamp`` are absolute (base + delta). Timestamps are the records' own even
    for LogAppendTime batches (Kafka consumers then use ``header.max_timestamp`` instead), so that
    re-encoding reproduces the wire bytes.
    """
    mv = memoryview(buf).cast("B")
    header = parse_header(mv)
    end = LOG_OVERHEAD + header.batch_length
    if end > len(mv):
        raise CorruptRecordBatch(f"record batch declares {end} bytes, only {len(mv)} present")
    batch = mv[:end]
    if verify_crc:
        _check_crc(header, batch)
    records = decode_section(header.compression, batch[HEADER_SIZE:], header.record_count, header.base_offset,
                             header.base_timestamp, max_uncompressed_bytes, impl=impl)
    return DecodedBatch(header, records)


def _fixed(arr: pa.Array, typ: pa.DataType, fill: int | None) -> pa.Array:
    if arr.type != typ:
        arr = arr.cast(typ)
    if arr.null_count:
        if fill is None:
            raise ValueError("offset column must not contain nulls")
        arr = pc.fill_null(arr, fill)
    return arr


def _bin_spec(arr: pa.Array | None, typ: pa.DataType) -> tuple[Any, Any, Any, int] | None:
    if arr is None:
        return None
    if arr.type != typ:
        arr = arr.cast(typ)
    bufs = arr.buffers()
    return (bufs[0] if arr.null_count else None, bufs[1], bufs[2], arr.offset)


def _headers_spec(arr: pa.Array | None) -> tuple[Any, ...] | None:
    if arr is None:
        return None
    if arr.type != HEADERS_TYPE:
        arr = arr.cast(HEADERS_TYPE)
    offsets = arr.offsets  # accounts for the list's own slice offset
    hstruct = arr.values
    if hstruct.null_count:
        raise ValueError("a header entry is null")
    hkey, hval = hstruct.field(0), hstruct.field(1)  # both account for the struct's offset
    if hkey.null_count:
        raise ValueError("a header key is null")
    return (
        arr.buffers()[0] if arr.null_count else None,
        offsets.buffers()[1],
        offsets.offset,
        _bin_spec(hkey, _STRING),
        _bin_spec(hval, _BINARY),
    )


def _int64_at(arr: pa.Array, i: int) -> int:
    """Element i of a null-free int64 array, without building a scalar."""
    return memoryview(arr.buffers()[1]).cast("q")[arr.offset + i]


def encode_batch(
    records: pa.RecordBatch | pa.Table,
    *,
    base_offset: int,
    compression: int | str = 0,
    attributes: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
    max_timestamp: int | None = None,
    base_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
    impl: ModuleType | None = None,
) -> bytes:
    """Encode rows into one RecordBatch v2 with a correct CRC-32C.

    ``offset`` (absolute; offsetDelta = offset - base_offset) and ``timestamp`` are needed; a missing
    ``key``/``value`` is all null, missing ``headers`` none. ``attributes`` when given overrides
    compression / timestamp_type / is_transactional / is_control. ``base_timestamp`` defaults to the
    first record's, ``max_timestamp`` to the largest, ``last_offset_delta`` to the last record's (pass
    the stored values to reproduce a compacted batch exactly).
    """
    mod = impl or _impl
    if isinstance(records, pa.Table):
        records = _table_to_batch(records)
    n = records.num_rows
    if attributes is None:
        attributes = codec_id(compression) & COMPRESSION_MASK
        if timestamp_type:
            attributes |= TIMESTAMP_TYPE_MASK
        if is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if is_control:
            attributes |= CONTROL_MASK
    codec = attributes & COMPRESSION_MASK

    columns = dict(zip(records.schema.names, records.columns, strict=True))
    offset_col = columns.get("offset")
    if offset_col is None:
        offsets = pa.array(range(base_offset, base_offset + n), _INT64)
    else:
        offsets = _fixed(offset_col, _INT64, None)
    ts_col = columns.get("timestamp")
    if ts_col is None:
        raise ValueError("records need a timestamp column")
    if pa.types.is_timestamp(ts_col.type):
        if ts_col.type.unit != "ms":
            ts_col = ts_col.cast(_TIMESTAMP_MS)
        ts_col = ts_col.view(_INT64)
    timestamps = _fixed(ts_col, _INT64, NO_TIMESTAMP)
    if n:
        if base_timestamp is None:
            base_timestamp = _int64_at(timestamps, 0)
        if last_offset_delta is None:
            last_offset_delta = _int64_at(offsets, n - 1) - base_offset
    else:
        base_timestamp = NO_TIMESTAMP if base_timestamp is None else base_timestamp
        last_offset_delta = 0 if last_offset_delta is None else last_offset_delta

    try:
        out, records_max_timestamp = mod.encode_records(
            base_offset,
            base_timestamp,
            n,
            HEADER_SIZE,
            (offsets.buffers()[1], offsets.offset),
            (timestamps.buffers()[1], timestamps.offset),
            _bin_spec(columns.get("key"), _BINARY),
            _bin_spec(columns.get("value"), _BINARY),
            _headers_spec(columns.get("headers")),
        )
    except OverflowError as exc:
        raise ValueError(str(exc)) from None
    if max_timestamp is None:
        max_timestamp = records_max_timestamp
    if codec:
        payload = compress(codec, memoryview(out)[HEADER_SIZE:], compression_level)
        del out[HEADER_SIZE:]
        out += payload
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        n,
    )
    struct.pack_into(">I", out, CRC_OFFSET, compute_crc(out))
    return bytes(out)


def _table_to_batch(table: pa.Table) -> pa.RecordBatch:
    table = table.combine_chunks()
    batches = table.to_batches()
    if not batches:
        return pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=table.schema)
    return batches[0]


__all__ = [
    "ATTRIBUTES_OFFSET",
    "C_IMPL",
    "DEFAULT_MAX_UNCOMPRESSED_BYTES",
    "IMPLEMENTATION",
    "PYTHON_IMPL",
    "RECORD_SCHEMA",
    "DecodedBatch",
    "RecordWalk",
    "ViewWalk",
    "decode_batch",
    "decode_records",
    "decode_section",
    "encode_batch",
    "records_from_buffers",
    "walk_records",
    "walk_views",
    "walk_views_many",
]
