"""Format 2 segments ("one copy"): Arrow record batches whose byte columns are views into the
Kafka records sections as the producers sent them.

A Kafka records section is a run of records whose keys, values and header keys/values are
contiguous byte ranges. Arrow's `binary_view` layout describes each value as a 16-byte view
(length, 4-byte prefix, buffer index, offset) into "variadic" data buffers, and Arrow IPC
compresses each buffer on its own as an int64 uncompressed length followed by an LZ4 frame or a
ZSTD frame: the frames Kafka's lz4 and zstd batches carry. So the records section itself, as the
producer compressed it, is the variadic data buffer of the `key`, `value` and header columns, and
one stored copy serves both Arrow readers (pyarrow, Polars, DuckDB) and Kafka fetches (a rebuilt
61-byte header, then the stored section). FORMAT.md, "Format version 2", is the byte layout.

pyarrow cannot write buffers that are already compressed, so this module writes the IPC
`Message` flatbuffers itself (a few fixed tables, no dependency); bodies are lists of chunks, the
sections among them zero-copy. The views come from the record walk (C, or its numpy twin), never
per record in Python. This module does no I/O and knows no Kafka codec: the
caller decompresses each section once and walks its records into views (`rows_from_section`).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
from crc32c import crc32c

from pylog.model import BINARY_VIEW_INLINE, COMPRESSION_MASK, HEADERS_TYPE, RECORD_SCHEMA, TIMESTAMP_TYPE_MASK

from .ipc import (
    BATCHES_KEY,
    CONTINUATION,
    FILE_MAGIC,
    Chunk,
    _field,
    _indirect,
    decode_entries,
    encode_entries,
)
from .schema import BATCH_DTYPE, BatchMeta

FORMAT_KEY = b"pylog.format"
CRCS_KEY = "pylog.crcs"
HEADER_KEY_TYPE = pa.string_view()
HEADER_VIEW_STRUCT = pa.struct([("key", HEADER_KEY_TYPE), ("value", pa.binary_view())])
SCHEMA_V2 = pa.schema(
    [
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms")),
        ("key", pa.binary_view()),
        ("value", pa.binary_view()),
        ("headers", pa.list_(HEADER_VIEW_STRUCT)),
    ],
    metadata={FORMAT_KEY: b"2"},
)
HEADERS_V2_TYPE = SCHEMA_V2.field("headers").type
SCHEMA_V2_MESSAGE: bytes = SCHEMA_V2.serialize().to_pybytes()
EOS = CONTINUATION + b"\x00\x00\x00\x00"

KAFKA_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch v2 header (61 bytes)
KAFKA_HEADER_SIZE = KAFKA_HEADER.size
_CRC_FROM = 21  # the CRC covers attributes .. end of batch
KAFKA_LZ4, KAFKA_ZSTD = 3, 4
ARROW_CODEC = {KAFKA_LZ4: 0, KAFKA_ZSTD: 1}  # Kafka codec -> BodyCompression.codec (LZ4_FRAME, ZSTD)
SEALED_MESSAGE_BYTES = 1 << 20  # sealing merges a segment's batches into messages of about this much
INLINE = BINARY_VIEW_INLINE
_NO_COMPRESSION = -1
Buffer = bytes | bytearray | memoryview

_Q = struct.Struct("<q")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")


# --------------------------------------------------------------------------------------------
# Rows: one or more Kafka batches ready to be one Arrow record batch


@dataclass
class Rows:
    """The columns of one Arrow record batch and the Kafka batches (records sections) behind it.

    Views are int32 quadruples (length, prefix, buffer index, offset); a view longer than
    `INLINE` names the ordinal of its section in `sections` as its buffer index."""

    entries: np.ndarray  # BATCH_DTYPE, `row` relative to these rows, `size` = 61 + section length
    crcs: np.ndarray  # uint32, each batch's CRC-32C with its stored section
    sections: list[memoryview]  # the stored records sections (the variadic buffers)
    raw_sizes: np.ndarray  # int64: uncompressed length of a compressed section, -1 for a plain one
    offset: np.ndarray  # int64
    timestamp: np.ndarray  # int64 (ms)
    key: np.ndarray  # (n, 4) int32 views
    key_valid: np.ndarray | None  # bool, None when no key is null
    value: np.ndarray
    value_valid: np.ndarray | None
    header_offsets: np.ndarray  # int32, n + 1, from 0
    header_key: np.ndarray
    header_value: np.ndarray
    header_value_valid: np.ndarray | None

    @property
    def num_rows(self) -> int:
        return len(self.offset)

    @property
    def kafka_codec(self) -> int:
        """The one compressed Kafka codec among the sections (0 if all are plain)."""
        if len(self.entries) == 1:
            return int(self.entries["attributes"][0]) & COMPRESSION_MASK
        codecs = set((self.entries["attributes"] & COMPRESSION_MASK).tolist()) - {0}
        if len(codecs) > 1:
            raise ValueError(f"sections of one message mix codecs {sorted(codecs)}")
        return codecs.pop() if codecs else 0


class RecordViews(Protocol):
    """One Kafka batch's records as format 2 columns (`pylog.protocol.records.batch.ViewWalk`):
    offsets, timestamps, and binary_view views ((n, 4) int32, long values in buffer 0 at their
    position in the uncompressed section) with validity (None: no null)."""

    @property
    def offset(self) -> np.ndarray: ...
    @property
    def timestamp(self) -> np.ndarray: ...
    @property
    def key(self) -> np.ndarray: ...
    @property
    def key_valid(self) -> np.ndarray | None: ...
    @property
    def value(self) -> np.ndarray: ...
    @property
    def value_valid(self) -> np.ndarray | None: ...
    @property
    def header_offsets(self) -> np.ndarray: ...
    @property
    def header_key(self) -> np.ndarray: ...
    @property
    def header_value(self) -> np.ndarray: ...
    @property
    def header_value_valid(self) -> np.ndarray | None: ...


def rows_from_section(meta: BatchMeta, crc: int, section: Buffer, raw_size: int, views: RecordViews, *,
                      log_append_time: int | None = None) -> Rows:
    """Rows for one Kafka batch from the walk of its records (`views`, built from the uncompressed
    records, `raw_size` bytes). `section` is the records section as stored (the producer's bytes,
    compressed with `meta`'s codec or plain) and `crc` the batch's CRC-32C. Under
    `log_append_time` the `timestamp` column holds that time (the records keep their own deltas,
    as Kafka's leader leaves them)."""
    n = len(views.offset)
    entry = np.array([(meta.base_offset, meta.base_timestamp, meta.max_timestamp, meta.producer_id, -1, -1,
                       meta.last_offset_delta, n, meta.base_sequence, meta.partition_leader_epoch,
                       meta.producer_epoch, meta.attributes, 0, 0, KAFKA_HEADER_SIZE + len(section))],
                     BATCH_DTYPE)
    compressed = bool(meta.attributes & COMPRESSION_MASK)
    return Rows(
        entries=entry,
        crcs=np.array([crc], np.uint32),
        sections=[memoryview(section).cast("B")],
        raw_sizes=np.array([raw_size if compressed else _NO_COMPRESSION], np.int64),
        offset=views.offset,
        timestamp=views.timestamp if log_append_time is None else np.full(n, log_append_time, np.int64),
        key=views.key,
        key_valid=views.key_valid,
        value=views.value,
        value_valid=views.value_valid,
        header_offsets=views.header_offsets,
        header_key=views.header_key,
        header_value=views.header_value,
        header_value_valid=views.header_value_valid,
    )


def batch_crc(meta: BatchMeta, section: Buffer) -> int:
    """CRC-32C of the Kafka batch `meta` describes with `section` as its records (for a batch
    whose header changed under the CRC: LogAppendTime, or a section recompressed from gzip)."""
    header = _kafka_header(meta, 0, len(section))
    return crc32c(section, crc32c(memoryview(header)[_CRC_FROM:]))


def kafka_batch(meta: BatchMeta, crc: int, section: Buffer) -> bytes:
    """The RecordBatch v2 bytes of a batch: its header from `meta` and `crc`, then `section`."""
    return _kafka_header(meta, crc, len(section)) + bytes(section)


def _kafka_header(meta: BatchMeta, crc: int, section_len: int) -> bytes:
    return KAFKA_HEADER.pack(
        meta.base_offset, KAFKA_HEADER_SIZE - 12 + section_len, meta.partition_leader_epoch, 2, crc,
        meta.attributes, meta.last_offset_delta, meta.base_timestamp, meta.max_timestamp,
        meta.producer_id, meta.producer_epoch, meta.base_sequence, meta.record_count)


def _concat_valid(parts: list[tuple[np.ndarray | None, int]]) -> np.ndarray | None:
    if all(v is None for v, _ in parts):
        return None
    return np.concatenate([np.ones(n, bool) if v is None else v for v, n in parts])


def concat_rows(groups: Sequence[Rows]) -> Rows:
    """One Rows of several (sealing merges small batches): small columns are concatenated, the
    sections are not touched; long views are renumbered to their section's new ordinal."""
    if len(groups) == 1:
        return groups[0]
    counts = [g.num_rows for g in groups]
    hcounts = [len(g.header_key) for g in groups]
    section_base = np.cumsum([0] + [len(g.sections) for g in groups[:-1]])
    row_base = np.cumsum([0, *counts[:-1]])

    def views(name: str, sizes: list[int]) -> np.ndarray:
        out = np.concatenate([getattr(g, name) for g in groups])
        shift = np.repeat(section_base, sizes).astype(np.int32)
        long = out[:, 0] > INLINE
        out[long, 2] += shift[long]
        return out

    # joined as bytes: np.concatenate of structured arrays promotes their fields pair by pair
    entries = np.frombuffer(b"".join([g.entries.tobytes() for g in groups]), BATCH_DTYPE).copy()
    entries["row"] += np.repeat(row_base, [len(g.entries) for g in groups]).astype(np.int32)
    hbase = np.cumsum([0, *hcounts[:-1]])
    header_offsets = np.concatenate(
        [np.zeros(1, np.int32), *((g.header_offsets[1:] + b).astype(np.int32)
                                  for g, b in zip(groups, hbase))])
    return Rows(
        entries=entries,
        crcs=np.concatenate([g.crcs for g in groups]),
        sections=[s for g in groups for s in g.sections],
        raw_sizes=np.concatenate([g.raw_sizes for g in groups]),
        offset=np.concatenate([g.offset for g in groups]),
        timestamp=np.concatenate([g.timestamp for g in groups]),
        key=views("key", counts),
        key_valid=_concat_valid([(g.key_valid, g.num_rows) for g in groups]),
        value=views("value", counts),
        value_valid=_concat_valid([(g.value_valid, g.num_rows) for g in groups]),
        header_offsets=header_offsets,
        header_key=views("header_key", hcounts),
        header_value=views("header_value", hcounts),
        header_value_valid=_concat_valid([(g.header_value_valid, h) for g, h in zip(groups, hcounts)]),
    )


# --------------------------------------------------------------------------------------------
# A minimal flatbuffer writer for the few Arrow tables written here (Message.fbs, File.fbs)


@functools.lru_cache(maxsize=64)
def _table_layout(codes: tuple[str | None, ...]) -> tuple[bytes, int, tuple[tuple[int, str, int], ...]]:
    """A table's vtable, size and field positions (largest fields first, each naturally aligned,
    after the 4-byte offset to the vtable)."""
    present = [(i, "I" if c == "o" else c) for i, c in enumerate(codes) if c is not None]
    layout = []
    pos = 4
    for i, code in sorted(present, key=lambda p: -struct.calcsize(p[1])):
        width = struct.calcsize(code)
        pos += -pos % width
        layout.append((i, code, pos))
        pos += width
    slots = [0] * len(codes)
    for i, _code, p in layout:
        slots[i] = p
    table_size = pos + (-pos % 4)
    vtable = struct.pack(f"<HH{len(codes)}H", 4 + 2 * len(codes), table_size, *slots)
    return vtable, table_size, tuple(layout)


class _Fb:
    """Builds a flatbuffer front to back: every table's vtable just before it, every object a
    table refers to after it (flatbuffer offsets are unsigned, pointing forward)."""

    def __init__(self) -> None:
        self.buf = bytearray(4)  # the root offset, set by `root`
        self.fixups: list[tuple[int, str]] = []

    def align(self, n: int, extra: int = 0) -> None:
        """Pad so that `extra` bytes from now the position is a multiple of `n`."""
        self.buf += bytes(-(len(self.buf) + extra) % n)

    def table(self, fields: Sequence[tuple[str, int] | None]) -> tuple[int, dict[int, int]]:
        """Write a table of `fields` ("h" int16, "b" int8, "q" int64, "o" an offset to fill with
        `point`, None absent): its position and each field's position."""
        vtable, table_size, layout = _table_layout(tuple(None if f is None else f[0] for f in fields))
        self.buf += bytes(-(len(self.buf) + len(vtable)) % 8)  # the table starts 8-aligned
        vt_at = len(self.buf)
        self.buf += vtable
        table_at = len(self.buf)
        self.buf += bytes(table_size)
        _I32.pack_into(self.buf, table_at, table_at - vt_at)
        refs: dict[int, int] = {}
        for i, code, p in layout:
            refs[i] = table_at + p
            if code != "I":
                struct.pack_into("<" + code, self.buf, table_at + p, fields[i][1])  # type: ignore[index]
        return table_at, refs

    def point(self, field_at: int, target: int) -> None:
        _U32.pack_into(self.buf, field_at, target - field_at)

    def vector(self, count: int, payload: bytes, align: int) -> int:
        """A vector of `count` elements (`payload` their bytes), aligned for them; its position."""
        self.align(max(align, 4), 4)
        at = len(self.buf)
        self.buf += _U32.pack(count) + payload
        return at

    def offsets_vector(self, count: int) -> tuple[int, list[int]]:
        """A vector of `count` offsets to fill with `point`; its position and the slots."""
        self.align(4)
        at = len(self.buf)
        self.buf += _U32.pack(count) + bytes(4 * count)
        return at, [at + 4 + 4 * i for i in range(count)]

    def string(self, text: bytes) -> int:
        self.align(4)
        at = len(self.buf)
        self.buf += _U32.pack(len(text)) + text + b"\x00"
        return at

    def root(self, table_at: int) -> None:
        _U32.pack_into(self.buf, 0, table_at)

    def finish(self) -> bytes:
        self.align(8)
        return bytes(self.buf)


def _key_values(fb: _Fb, field_at: int, pairs: Sequence[tuple[bytes, bytes]]) -> list[int]:
    """The custom metadata `pairs`; where each value's bytes start."""
    vec, slots = fb.offsets_vector(len(pairs))
    fb.point(field_at, vec)
    values = []
    for slot, (key, value) in zip(slots, pairs):
        at, refs = fb.table([("o", 0), ("o", 0)])
        fb.point(slot, at)
        fb.point(refs[0], fb.string(key))
        value_at = fb.string(value)
        fb.point(refs[1], value_at)
        values.append(value_at + 4)
    return values


_MESSAGE_VERSION_V5 = 4
_HEADER_RECORD_BATCH = 3
_BUFFER = struct.Struct("<qq")


@dataclass(frozen=True)
class _MetadataTemplate:
    """A RecordBatch `Message` flatbuffer for one layout (codec, variadic counts, sizes of the
    custom values), with where the per-message numbers go: built once per layout, then copied
    and patched for each message instead of being built field by field."""

    buf: bytes
    length_at: int
    body_length_at: int
    nodes_at: int
    buffers_at: int
    custom_at: tuple[int, ...]


@functools.lru_cache(maxsize=256)
def _metadata_template(n_nodes: int, n_buffers: int, codec: int | None, variadic: tuple[int, ...],
                       custom: tuple[tuple[bytes, int], ...]) -> _MetadataTemplate:
    """The flatbuffer `Message` of a RecordBatch (Message.fbs, metadata version V5) with zeroed
    numbers and custom values of the given keys and sizes."""
    fb = _Fb()
    msg_at, msg = fb.table([("h", _MESSAGE_VERSION_V5), ("b", _HEADER_RECORD_BATCH), ("o", 0),
                            ("q", 0), ("o", 0)])
    fb.root(msg_at)
    compression = ("o", 0) if codec is not None else None
    rb_at, rb = fb.table([("q", 0), ("o", 0), ("o", 0), compression, ("o", 0)])
    fb.point(msg[2], rb_at)
    if codec is not None:
        fb.point(rb[3], fb.table([("b", codec), ("b", 0)])[0])  # method BUFFER
    nodes_at = fb.vector(n_nodes, bytes(16 * n_nodes), 8) + 4
    fb.point(rb[1], nodes_at - 4)
    buffers_at = fb.vector(n_buffers, bytes(16 * n_buffers), 8) + 4
    fb.point(rb[2], buffers_at - 4)
    fb.point(rb[4], fb.vector(len(variadic), struct.pack(f"<{len(variadic)}q", *variadic), 8))
    custom_at = _key_values(fb, msg[4], [(key, bytes(size)) for key, size in custom])
    return _MetadataTemplate(fb.finish(), rb[0], msg[3], nodes_at, buffers_at, tuple(custom_at))


def _record_batch_metadata(length: int, nodes: bytes, buffers: bytes, codec: int | None,
                           variadic: tuple[int, ...], body_length: int,
                           custom: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The flatbuffer `Message` of a RecordBatch (Message.fbs, metadata version V5): its layout's
    template with this message's numbers (`nodes` and `buffers`: int64 (length, null count) and
    (offset, length) pairs) and custom values written in."""
    t = _metadata_template(len(nodes) // 16, len(buffers) // 16, codec, variadic,
                           tuple((key, len(value)) for key, value in custom))
    buf = bytearray(t.buf)
    _Q.pack_into(buf, t.length_at, length)
    _Q.pack_into(buf, t.body_length_at, body_length)
    buf[t.nodes_at:t.nodes_at + len(nodes)] = nodes
    buf[t.buffers_at:t.buffers_at + len(buffers)] = buffers
    for at, (_key, value) in zip(t.custom_at, custom):
        buf[at:at + len(value)] = value
    return bytes(buf)


# --------------------------------------------------------------------------------------------
# Encoding a message, a stream, a file


@dataclass
class Message:
    """One encapsulated IPC record batch message: its chunks (sections zero-copy) and length."""

    chunks: list[Chunk]
    length: int
    metadata_length: int  # prefix + flatbuffer (what a file footer's Block records)
    body_length: int
    rows: int


def _bitmap(valid: np.ndarray | None) -> tuple[bytes, int]:
    if valid is None:
        return b"", 0
    return np.packbits(valid, bitorder="little").tobytes(), int(len(valid) - np.count_nonzero(valid))


Layout = tuple[bytes, bytes, bytes, tuple[int, int, int, int], int]
"""A message's small buffers, its 8 nodes and every buffer's (offset, length) (int64 pairs), the
variadic buffer counts of key, value, header key and header value, and the body length."""


def _layout_py(rows: Rows, section_sizes: np.ndarray, prefix: bool) -> Layout:
    """The pure-Python twin of the accelerator's `onecopy_layout`."""
    n, nh, k = rows.num_rows, len(rows.header_key), len(section_sizes)
    small = bytearray()
    buffers: list[tuple[int, int] | int] = []  # (offset, length), or a section ordinal

    def add(data: bytes | np.ndarray) -> None:
        raw = data.tobytes() if isinstance(data, np.ndarray) else data
        if not raw:
            buffers.append((len(small), 0))
            return
        at = len(small)
        if prefix:
            small.extend(_Q.pack(_NO_COMPRESSION))
        small.extend(raw)
        buffers.append((at, len(small) - at))
        small.extend(bytes(-len(small) % 8))

    nodes: list[tuple[int, int]] = []
    variadic: list[int] = []

    def view_column(views: np.ndarray, valid: np.ndarray | None, length: int, force: bool) -> None:
        bitmap, nulls = _bitmap(valid)
        nodes.append((length, nulls))
        add(bitmap)
        add(views)
        refer = force or bool(length and (views[:, 0] > INLINE).any())
        variadic.append(k if refer else 0)
        if refer:
            buffers.extend(range(k))

    nodes.append((n, 0))
    add(b"")
    add(rows.offset)
    nodes.append((n, 0))
    add(b"")
    add(rows.timestamp)
    view_column(rows.key, rows.key_valid, n, False)
    view_column(rows.value, rows.value_valid, n, True)
    nodes.append((n, 0))  # headers: list
    add(b"")
    add(rows.header_offsets)
    nodes.append((nh, 0))  # its struct
    add(b"")
    view_column(rows.header_key, None, nh, False)
    view_column(rows.header_value, rows.header_value_valid, nh, False)
    # the sections after the small buffers, each once, every column's references aliasing them
    pos = len(small)
    where: list[tuple[int, int]] = []
    for size in section_sizes.tolist():
        length = size + (8 if prefix else 0)
        where.append((pos, length))
        pos += length + (-length % 8)
    spans = [where[b] if isinstance(b, int) else b for b in buffers]
    return (bytes(small), np.array(nodes, "<i8").tobytes(), np.array(spans, "<i8").tobytes(),
            (variadic[0], variadic[1], variadic[2], variadic[3]), pos)


def _layout_c(rows: Rows, section_sizes: np.ndarray, prefix: bool) -> Layout:
    c = np.ascontiguousarray
    return _c_layout(c(rows.offset), c(rows.timestamp), c(rows.key), _bytes_or_none(rows.key_valid),
                     c(rows.value), _bytes_or_none(rows.value_valid), c(rows.header_offsets, np.int32),
                     c(rows.header_key), c(rows.header_value), _bytes_or_none(rows.header_value_valid),
                     section_sizes, prefix)


def _bytes_or_none(valid: np.ndarray | None) -> np.ndarray | None:
    return None if valid is None else np.ascontiguousarray(valid, np.bool_)


# the C accelerator lays the small buffers out in one call (absent without a compiler at install
# time; PYLOG_PURE_PYTHON=1: the twin)
try:
    from ._clayout import onecopy_layout as _c_layout  # type: ignore[import-not-found, unused-ignore]
except ImportError:
    _c_layout = None
layout = _layout_c if _c_layout is not None and os.environ.get("PYLOG_PURE_PYTHON") != "1" else _layout_py
_PAD = [bytes(i) for i in range(8)]


def encode_message(rows: Rows) -> Message:
    """The IPC message of `rows`: small buffers first, then each section once. The `value`
    column names every section as its variadic buffers (so each batch's bytes are reachable
    from the metadata alone); `key` and the header columns name them too when one of their
    values is longer than 12 bytes, as aliases of the same body ranges (none otherwise)."""
    kafka_codec = rows.kafka_codec
    codec = ARROW_CODEC.get(kafka_codec) if kafka_codec else None
    if kafka_codec and codec is None:
        raise ValueError(f"Kafka codec {kafka_codec} cannot be an Arrow IPC buffer codec")
    prefix = codec is not None
    sections = rows.sections
    small, nodes, spans, variadic, body_length = layout(
        rows, np.array([len(s) for s in sections], np.int64), prefix)
    body_chunks: list[Chunk] = [small]
    for section, raw_size in zip(sections, rows.raw_sizes.tolist()):
        if prefix:
            body_chunks.append(_Q.pack(raw_size))
        body_chunks.append(section)
        pad = -(len(section) + (8 if prefix else 0)) % 8
        if pad:
            body_chunks.append(_PAD[pad])
    custom = [(BATCHES_KEY.encode(), encode_entries(rows.entries.tobytes()).encode()),
              (CRCS_KEY.encode(), base64.b64encode(rows.crcs.astype("<u4").tobytes()))]
    fb = _record_batch_metadata(rows.num_rows, nodes, spans, codec, variadic, body_length, custom)
    head = CONTINUATION + _I32.pack(len(fb))
    return Message([head, fb, *body_chunks], 8 + len(fb) + body_length, 8 + len(fb), body_length,
                   rows.num_rows)


def stream_chunks(messages: Sequence[Message]) -> list[Chunk]:
    """An IPC stream (the active segment's `.arrows`): the schema message, then the messages."""
    return [SCHEMA_V2_MESSAGE, *(c for m in messages for c in m.chunks)]


_BLOCK = struct.Struct("<qi4xq")


def file_chunks(messages: Sequence[Message]) -> list[Chunk]:
    """An IPC file (a sealed `.arrow`): magic, schema, the messages, end of stream, footer."""
    out: list[Chunk] = [FILE_MAGIC + b"\x00\x00", SCHEMA_V2_MESSAGE]
    pos = 8 + len(SCHEMA_V2_MESSAGE)
    blocks = []
    for m in messages:
        blocks.append(_BLOCK.pack(pos, m.metadata_length, m.body_length))
        out.extend(m.chunks)
        pos += m.length
    out.append(EOS)
    footer = _footer(blocks)
    out += [footer, _I32.pack(len(footer)), FILE_MAGIC]
    return out


def _footer(blocks: list[bytes]) -> bytes:
    """File.fbs `Footer`; its `schema` points into a verbatim copy of the schema message's
    flatbuffer (offsets inside a flatbuffer are relative, so the copy stays valid)."""
    fb = _Fb()
    footer_at, footer = fb.table([("h", _MESSAGE_VERSION_V5), ("o", 0), None, ("o", 0)])
    fb.root(footer_at)
    fb.point(footer[3], fb.vector(len(blocks), b"".join(blocks), 8))
    fb.align(8)
    base = len(fb.buf)
    schema_fb = memoryview(SCHEMA_V2_MESSAGE)[8:]
    fb.buf += schema_fb
    message = _indirect(schema_fb, 0)
    header_at = _field(schema_fb, message, 2)
    assert header_at is not None
    fb.point(footer[1], base + _indirect(schema_fb, header_at))
    return fb.finish()


# --------------------------------------------------------------------------------------------
# Reading a stored message back as Kafka batches (fetch) or as Rows (sealing)


@dataclass
class ParsedMessage:
    """What a stored format 2 message holds, found from its metadata alone (nothing decompressed)."""

    entries: np.ndarray
    crcs: np.ndarray
    compressed: bool
    buffers: list[memoryview]  # every body buffer as written (with its 8-byte prefix if compressed)
    variadic: list[int]  # per view column: key, value, header key, header value


def _vector(fb: memoryview, table: int, index: int) -> tuple[int, int]:
    at = _field(fb, table, index)
    if at is None:
        return 0, 0
    vec = _indirect(fb, at)
    return vec + 4, _U32.unpack_from(fb, vec)[0]


def parse_message(message: memoryview | bytes) -> ParsedMessage:
    """The batches, CRCs and body buffers of one encapsulated format 2 record batch message."""
    mv = memoryview(message).cast("B")
    if bytes(mv[:4]) != CONTINUATION:
        raise ValueError("not an encapsulated IPC message")
    meta_len = _I32.unpack_from(mv, 4)[0]
    fb = mv[8:8 + meta_len]
    body = mv[8 + meta_len:]
    root = _indirect(fb, 0)
    header_at = _field(fb, root, 2)
    if header_at is None:
        raise ValueError("message has no header")
    rb = _indirect(fb, header_at)
    custom: dict[bytes, bytes] = {}
    vec, count = _vector(fb, root, 4)
    for i in range(count):
        kv = _indirect(fb, vec + 4 * i)
        k_at, v_at = _field(fb, kv, 0), _field(fb, kv, 1)
        if k_at is not None and v_at is not None:
            ks, vs = _indirect(fb, k_at), _indirect(fb, v_at)
            custom[bytes(fb[ks + 4:ks + 4 + _U32.unpack_from(fb, ks)[0]])] = bytes(
                fb[vs + 4:vs + 4 + _U32.unpack_from(fb, vs)[0]])
    if BATCHES_KEY.encode() not in custom or CRCS_KEY.encode() not in custom:
        raise ValueError("not a format 2 record batch message (no pylog.batches / pylog.crcs)")
    entries = np.frombuffer(decode_entries(custom[BATCHES_KEY.encode()]), BATCH_DTYPE).copy()
    crcs = np.frombuffer(base64.b64decode(custom[CRCS_KEY.encode()]), "<u4")
    if len(crcs) != len(entries):
        raise ValueError(f"{len(entries)} batches but {len(crcs)} CRCs")
    bvec, nbuf = _vector(fb, rb, 2)
    spans = np.frombuffer(fb, "<i8", 2 * nbuf, bvec).reshape(-1, 2)
    buffers = [body[o:o + n] for o, n in spans.tolist()]
    vvec, nvar = _vector(fb, rb, 4)
    variadic = np.frombuffer(fb, "<i8", nvar, vvec).tolist() if nvar else []
    return ParsedMessage(entries, crcs, _field(fb, rb, 3) is not None, buffers, variadic)


# buffer ordinals: offset (2), timestamp (2), key (2 + variadic[0]), value (2 + variadic[1]), ...
def _value_sections(p: ParsedMessage) -> list[memoryview]:
    first = 4 + 2 + p.variadic[0] + 2
    return p.buffers[first:first + p.variadic[1]]


def kafka_batches(message: memoryview | bytes) -> list[list[Chunk]]:
    """For each Kafka batch of a stored message, what a fetch sends: the 61-byte header rebuilt
    from its `.batches` entry and CRC, then its stored records section (zero-copy)."""
    p = parse_message(message)
    sections = _value_sections(p)
    if len(sections) != len(p.entries):
        raise ValueError(f"{len(p.entries)} batches but {len(sections)} sections")
    out: list[list[Chunk]] = []
    for e, crc, region in zip(p.entries.tolist(), p.crcs.tolist(), sections):
        section = region[8:] if p.compressed else region
        # e: base_offset, base_ts, max_ts, pid, append_time, horizon, last_offset_delta,
        # record_count, base_sequence, epoch, producer_epoch, attributes, ... (BATCH_DTYPE)
        header = KAFKA_HEADER.pack(e[0], KAFKA_HEADER_SIZE - 12 + len(section), e[9], 2, crc, e[11], e[6],
                                   e[1], e[2], e[3], e[10], e[8], e[7])
        out.append([header, section])
    return out


def _buffer(p: ParsedMessage, i: int) -> memoryview:
    b = p.buffers[i]
    return b[8:] if p.compressed and len(b) else b


def rows_from_message(message: memoryview | bytes) -> Rows:
    """The Rows of a stored message (for sealing), read from its metadata and small buffers; no
    section is decompressed or copied."""
    p = parse_message(message)
    n = int(p.entries["record_count"].sum())
    kv, vv, hkv, _ = p.variadic

    def valid(i: int, length: int) -> np.ndarray | None:
        b = _buffer(p, i)
        if not len(b):
            return None
        return np.unpackbits(np.frombuffer(b, np.uint8), bitorder="little")[:length].astype(bool)

    def views(i: int, length: int) -> np.ndarray:
        return np.frombuffer(_buffer(p, i), np.int32, 4 * length).reshape(-1, 4).copy()

    header_offsets = np.frombuffer(_buffer(p, 9 + kv + vv), np.int32, n + 1) if n else np.zeros(1, np.int32)
    nh = int(header_offsets[-1])
    hk = 11 + kv + vv
    hv = hk + 2 + hkv
    sections = _value_sections(p)
    prefixes = [_Q.unpack_from(s, 0)[0] if p.compressed else _NO_COMPRESSION for s in sections]
    return Rows(
        entries=p.entries,
        crcs=p.crcs.astype(np.uint32),
        sections=[s[8:] if p.compressed else s for s in sections],
        raw_sizes=np.array(prefixes, np.int64),
        offset=np.frombuffer(_buffer(p, 1), np.int64, n),
        timestamp=np.frombuffer(_buffer(p, 3), np.int64, n),
        key=views(5, n),
        key_valid=valid(4, n),
        value=views(7 + kv, n),
        value_valid=valid(6 + kv, n),
        header_offsets=header_offsets.copy(),
        header_key=views(hk + 1, nh),
        header_value=views(hv + 1, nh),
        header_value_valid=valid(hv, nh),
    )


def to_record_schema(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A format 2 record batch as RECORD_SCHEMA (format 1 types), for code written against it."""
    cols = [batch.column(0), batch.column(1), *(to_record_type(batch.column(i)) for i in (2, 3, 4))]
    return pa.RecordBatch.from_arrays(cols, schema=RECORD_SCHEMA)


_NO_HEADERS = pa.nulls(0, HEADERS_TYPE.value_type)  # not pa.array: that imports pandas when present


def to_record_type(column: pa.Array) -> pa.Array:
    """A column of a format 2 batch as its RECORD_SCHEMA type (any other column as it is): view
    values copied into binary; headers likewise, except that a column without any header keeps its
    offsets and validity (the common case costs no cast). Readers whose output takes views
    (Polars, DuckDB) skip this."""
    kind = column.type
    if kind == pa.binary_view():
        return column.cast(pa.binary())
    if kind == HEADERS_V2_TYPE:
        if len(column.values):
            return column.cast(HEADERS_TYPE)
        return pa.Array.from_buffers(HEADERS_TYPE, len(column), column.buffers()[:2], column.null_count,
                                     column.offset, children=[_NO_HEADERS])
    return column


# --------------------------------------------------------------------------------------------
# What the log does with Rows: assign offsets, cut at batch boundaries, group for sealing


def at_base_offset(rows: Rows, base_offset: int, partition_leader_epoch: int | None = None) -> Rows:
    """`rows` of one Kafka batch moved to `base_offset` (and `partition_leader_epoch`): both lie
    outside the batch's CRC, so the section and CRC stay as they are."""
    shift = base_offset - int(rows.entries["base_offset"][0])
    if shift == 0 and partition_leader_epoch is None:
        return rows
    e = rows.entries.copy()
    e["base_offset"] += shift
    if partition_leader_epoch is not None:
        e["partition_leader_epoch"] = partition_leader_epoch
    return dataclasses.replace(rows, entries=e, offset=rows.offset + shift if shift else rows.offset)


def at_append_time(rows: Rows, append_time: int) -> Rows:
    """`rows` of one Kafka batch under LogAppendTime: attribute bit 3, `max_timestamp` and every
    row's timestamp the append time; the section keeps the producer's deltas and the CRC is signed
    again (the header changed under it)."""
    e = rows.entries.copy()
    e["attributes"] |= TIMESTAMP_TYPE_MASK
    e["max_timestamp"] = append_time
    meta = BatchMeta(*(e[f].tolist()[0] for f in BatchMeta._fields))
    crc = batch_crc(meta, rows.sections[0])
    return dataclasses.replace(rows, entries=e, crcs=np.array([crc], np.uint32),
                               timestamp=np.full(rows.num_rows, append_time, np.int64))


def take_batches(rows: Rows, start: int, stop: int) -> Rows:
    """The Kafka batches [start, stop) of `rows` as Rows of their own (rows, headers and views
    cut at batch boundaries, sections untouched)."""
    k = len(rows.entries)
    if start == 0 and stop >= k:
        return rows
    e = rows.entries[start:stop].copy()
    r0 = int(e["row"][0]) if len(e) else 0
    r1 = int(e["row"][-1]) + int(e["record_count"][-1]) if len(e) else 0
    h0, h1 = int(rows.header_offsets[r0]), int(rows.header_offsets[r1])
    e["row"] -= r0

    def views(v: np.ndarray, a: int, b: int) -> np.ndarray:
        out = v[a:b].copy()
        out[out[:, 0] > INLINE, 2] -= start
        return out

    def valid(v: np.ndarray | None, a: int, b: int) -> np.ndarray | None:
        return None if v is None else v[a:b]

    return Rows(
        entries=e,
        crcs=rows.crcs[start:stop].copy(),
        sections=rows.sections[start:stop],
        raw_sizes=rows.raw_sizes[start:stop].copy(),
        offset=rows.offset[r0:r1],
        timestamp=rows.timestamp[r0:r1],
        key=views(rows.key, r0, r1),
        key_valid=valid(rows.key_valid, r0, r1),
        value=views(rows.value, r0, r1),
        value_valid=valid(rows.value_valid, r0, r1),
        header_offsets=(rows.header_offsets[r0:r1 + 1] - h0).astype(np.int32),
        header_key=views(rows.header_key, h0, h1),
        header_value=views(rows.header_value, h0, h1),
        header_value_valid=valid(rows.header_value_valid, h0, h1),
    )


def split_batches(rows: Rows) -> list[Rows]:
    """One Rows per Kafka batch of `rows`."""
    return [take_batches(rows, i, i + 1) for i in range(len(rows.entries))]


def group_for_message(parts: Sequence[Rows], target_bytes: int) -> list[Rows]:
    """Consecutive parts merged into messages of about `target_bytes` of sections each; an lz4
    and a zstd section never share a message (a plain one joins either)."""
    out: list[Rows] = []
    group: list[Rows] = []
    size, codec = 0, 0
    for rows in parts:
        c = rows.kafka_codec
        if group and (size >= target_bytes or (c and codec and c != codec)):
            out.append(concat_rows(group))
            group, size, codec = [], 0, 0
        group.append(rows)
        size += sum(len(s) for s in rows.sections)
        codec = codec or c
    if group:
        out.append(concat_rows(group))
    return out


RowsDecoder = Callable[[Buffer, str], Rows]
"""Format 2 Rows of one RecordBatch v2 at its own base offset and leader epoch, its gzip / snappy
section stored as the given `pylog.segment.compression` says (the owner's Kafka codec, e.g.
`pylog.onecopy_kafka.rows_from_kafka`); raises on a corrupt batch."""


def with_header_timestamps(rows: Rows) -> Rows:
    """`rows` whose batches' headers say LogAppendTime: every row of such a batch has the
    header's `max_timestamp` as its timestamp (the records may keep the producer's deltas)."""
    e = rows.entries
    if len(e) == 1:
        if not int(e["attributes"][0]) & TIMESTAMP_TYPE_MASK:
            return rows
        append_time = int(e["max_timestamp"][0])
        return dataclasses.replace(rows, timestamp=np.full(rows.num_rows, append_time, np.int64))
    appended = (e["attributes"] & TIMESTAMP_TYPE_MASK) != 0
    if not appended.any():
        return rows
    counts = e["record_count"]
    timestamp = np.where(np.repeat(appended, counts), np.repeat(e["max_timestamp"], counts), rows.timestamp)
    return dataclasses.replace(rows, timestamp=timestamp.astype(np.int64))
