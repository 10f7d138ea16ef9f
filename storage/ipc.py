"""Arrow IPC framing used by segments: encoding one message per batch, walking encapsulated messages.

An encapsulated IPC message is `0xFFFFFFFF`, an int32 metadata length (padded to 8), a flatbuffer
`Message` and a body of `Message.bodyLength` bytes. Recovery and index rebuilds need only the
lengths and the message's `custom_metadata` (where pylog keeps the batch metadata), so this module
reads those few flatbuffer fields itself instead of materialising the record batch.
"""

from __future__ import annotations

import base64
import itertools
import os
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import NamedTuple, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from pylog.model import COMPRESSION_MASK, RECORD_SCHEMA

from .schema import BATCH_DTYPE

CONTINUATION = b"\xff\xff\xff\xff"
FILE_MAGIC = b"ARROW1"
BATCHES_KEY = "pylog.batches"
SCHEMA_MESSAGE: bytes = RECORD_SCHEMA.serialize().to_pybytes()
# Buffers are compressed on the calling thread: Arrow's default hands a message's buffers to its
# CPU pool, and for one batch the futex handoffs and wakeups cost more than the codec saves.
_WRITE_OPTIONS = {
    None: ipc.IpcWriteOptions(use_threads=False),
    "lz4": ipc.IpcWriteOptions(compression="lz4", use_threads=False),
    "zstd": ipc.IpcWriteOptions(compression="zstd", use_threads=False),
}
# A stream read from a file's first message decompresses on the reading thread: Arrow's pool would
# spread one message's few buffers (the value data is most of the bytes) over its workers, costing
# about a quarter more CPU for no shorter read (measured on lz4 segments of 100 B values).
_READ_OPTIONS = ipc.IpcReadOptions(use_threads=False)
FILE_PREFIX = 8 + len(SCHEMA_MESSAGE)  # "ARROW1\0\0" then the schema message

_HEADER_RECORD_BATCH = 3
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_I64 = struct.Struct("<q")


# Segment body compression (topic config `pylog.segment.compression`). Under "producer" a batch the
# producer compressed is stored compressed too, so a compressed topic stays small on disk and in
# the page cache: Arrow IPC compresses buffers with lz4_frame or zstd only, so gzip maps to zstd
# and snappy to lz4. Small bodies stay plain: per-buffer framing would cost more than it saves.
_BODY_CODEC_FOR_KAFKA = (None, "zstd", "lz4", "lz4", "zstd")
MIN_COMPRESSED_BODY = 16 * 1024


def body_codec(policy: str, kafka_codec: int, body_bytes: int) -> str | None:
    """The IPC body codec for a message of `body_bytes` whose batches the producer compressed
    with `kafka_codec` (attribute bits), under the topic's `pylog.segment.compression`."""
    if body_bytes < MIN_COMPRESSED_BODY or policy == "none":
        return None
    if policy == "producer":
        codec = kafka_codec & COMPRESSION_MASK
        return _BODY_CODEC_FOR_KAFKA[codec] if codec < len(_BODY_CODEC_FOR_KAFKA) else None
    return policy


def block_kafka_codec(entries: np.ndarray) -> int:
    """The Kafka codec most of these batches' records were produced with (BATCH_DTYPE entries)."""
    if not len(entries):
        return 0
    counts = np.bincount(entries["attributes"].astype(np.int64) & COMPRESSION_MASK,
                         weights=entries["record_count"], minlength=8)
    return int(np.argmax(counts))


class MessageInfo(NamedTuple):
    """Where one complete encapsulated message lies and what pylog stored in it."""

    position: int
    length: int
    is_record_batch: bool
    batches: bytes | None  # packed BATCH_DTYPE entries from custom metadata, if present


# What is written out: Arrow buffers (the writer's bodies, zero-copy) and bytes-like objects
Chunk: TypeAlias = "bytes | bytearray | memoryview | pa.Buffer"


class _Collect:
    """File-like sink that keeps the writer's output chunks (pyarrow passes body buffers zero-copy)."""

    closed = False

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def write(self, data: Chunk) -> int:
        self.chunks.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _StreamChunk:
    """One long-lived IPC stream writer (for one body codec) filling a preallocated chunk, so a
    small append costs one `write_batch` (no writer, schema message or size estimate per message).
    Messages are slices of the chunk; a full chunk is dropped (it lives on while a slice still
    points into it). A compressing writer sizes the next message from the last one's compression
    ratio (with a margin) instead of the uncompressed worst case, so a well-compressed 1 MB batch
    does not start a fresh chunk and writer each time; a message that overflows that guess is
    written again into a stream of its own."""

    __slots__ = ("buf", "codec", "ratio", "sink", "writer")

    def __init__(self, codec: str | None) -> None:
        self.codec = codec
        self.ratio = 1.0  # message bytes per uncompressed buffer byte, last time (1.0: plain)
        self.buf: pa.Buffer | None = None
        self.sink: pa.FixedSizeBufferWriter | None = None
        self.writer: ipc.RecordBatchStreamWriter | None = None

    def start(self, size: int) -> None:
        self.buf = pa.allocate_buffer(max(STREAM_CHUNK_BYTES, size + len(SCHEMA_MESSAGE)))
        self.sink = pa.FixedSizeBufferWriter(self.buf)
        options = _WRITE_OPTIONS[self.codec]
        self.writer = ipc.RecordBatchStreamWriter(self.sink, RECORD_SCHEMA, options=options)

    def drop(self) -> None:
        self.buf = self.sink = self.writer = None


class _StreamChunks(threading.local):
    """Per thread: a `_StreamChunk` per body codec."""

    def __init__(self) -> None:
        self.by_codec = {codec: _StreamChunk(codec) for codec in _WRITE_OPTIONS}


STREAM_CHUNK_BYTES = 256 * 1024
_chunks = _StreamChunks()


def encode_message(batch: pa.RecordBatch, entries: bytes, codec: str | None = None) -> pa.Buffer:
    """One encapsulated record batch message carrying `entries` (packed BATCH_DTYPE) as custom
    metadata, its body compressed with `codec` ("lz4", "zstd" or None), as a zero-copy slice of
    the calling thread's stream chunk for that codec (see `_StreamChunk`)."""
    metadata = {BATCHES_KEY: encode_entries(entries)}
    # Metadata flatbuffer (nodes, buffers, custom metadata), 8-byte padding of 19 buffers, and
    # the worst-case growth of compressed buffers.
    total = batch.get_total_buffer_size()
    c = _chunks.by_codec[codec]
    body = total if codec is None else int(total * min(1.0, 2 * c.ratio)) + total // 128 + 19 * 64
    need = body + len(metadata[BATCHES_KEY]) + 2048
    if c.buf is None or c.buf.size - c.sink.tell() < need:  # type: ignore[union-attr]
        c.start(need)
    assert c.buf is not None and c.sink is not None and c.writer is not None
    start = c.sink.tell() or len(SCHEMA_MESSAGE)  # a fresh writer emits the schema message first
    try:
        c.writer.write_batch(batch, custom_metadata=metadata)
    except (pa.ArrowInvalid, OSError):  # the estimate was short (or the writer broke): grow instead
        c.drop()
        c.ratio = 1.0
        grow = pa.BufferOutputStream()
        ipc.RecordBatchStreamWriter(grow, RECORD_SCHEMA, options=_WRITE_OPTIONS[codec]).write_batch(
            batch, custom_metadata=metadata)
        return grow.getvalue().slice(len(SCHEMA_MESSAGE))
    length = c.sink.tell() - start
    if codec is not None and total:
        c.ratio = length / total
    return c.buf.slice(start, length)


def encode_entries(entries: bytes) -> str:
    return base64.b64encode(entries).decode("ascii")


def decode_entries(text: bytes) -> bytes:
    raw = base64.b64decode(text, validate=True)
    if len(raw) % BATCH_DTYPE.itemsize:
        raise ValueError("batch metadata length is not a whole number of entries")
    return raw


def write_all(fd: int, chunks: Sequence[Chunk]) -> None:
    """Hand every chunk to the kernel (os.writev, retried on short writes)."""
    if len(chunks) <= 1024:  # the common case: one writev takes them all
        n = os.writev(fd, chunks)
        if n == sum([c.nbytes if type(c) is memoryview else len(c) for c in chunks]):
            return
        chunks = [memoryview(b"".join([bytes(c) for c in chunks]))[n:]]
    views = [v for v in (memoryview(c).cast("B") for c in chunks) if len(v)]
    while views:
        n = os.writev(fd, views[:1024])
        while n and views:
            if n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][n:]
                n = 0


def _field(buf: memoryview, table: int, index: int) -> int | None:
    """Absolute position of field `index` of the flatbuffer table at `table`, or None if absent."""
    vtable = table - _I32.unpack_from(buf, table)[0]
    vlen = _U16.unpack_from(buf, vtable)[0]
    slot = 4 + 2 * index
    if slot + 2 > vlen:
        return None
    rel = _U16.unpack_from(buf, vtable + slot)[0]
    return table + rel if rel else None


def _indirect(buf: memoryview, pos: int) -> int:
    return pos + _U32.unpack_from(buf, pos)[0]


def _string(buf: memoryview, pos: int) -> bytes:
    start = _indirect(buf, pos)
    n = _U32.unpack_from(buf, start)[0]
    if start + 4 + n > len(buf):
        raise ValueError("string past end of metadata")
    return bytes(buf[start + 4:start + 4 + n])


def parse_message(buf: memoryview, pos: int, end: int | None = None) -> MessageInfo | None:
    """The complete message starting at `pos`, or None if the bytes there are not one (torn,
    end-of-stream marker, or garbage). `buf` must hold at least the prefix and metadata; the body
    must end within `end` (default: the end of `buf`)."""
    if end is None:
        end = len(buf)
    if pos + 8 > len(buf) or bytes(buf[pos:pos + 4]) != CONTINUATION:
        return None
    meta_len = _I32.unpack_from(buf, pos + 4)[0]
    if meta_len <= 0 or meta_len % 8 or pos + 8 + meta_len > min(end, len(buf)):
        return None
    fb = buf[pos + 8:pos + 8 + meta_len]
    try:
        root = _indirect(fb, 0)
        htype_at = _field(fb, root, 1)
        htype = fb[htype_at] if htype_at is not None else 0
        body_at = _field(fb, root, 3)
        body_len = _I64.unpack_from(fb, body_at)[0] if body_at is not None else 0
        batches = None
        meta_at = _field(fb, root, 4)
        if meta_at is not None:
            vec = _indirect(fb, meta_at)
            for i in range(_U32.unpack_from(fb, vec)[0]):
                kv = _indirect(fb, vec + 4 + 4 * i)
                k_at, v_at = _field(fb, kv, 0), _field(fb, kv, 1)
                if k_at is not None and v_at is not None and _string(fb, k_at) == BATCHES_KEY.encode():
                    batches = decode_entries(_string(fb, v_at))
    except (struct.error, IndexError, ValueError):
        return None
    if body_len < 0 or body_len % 8:
        return None
    length = 8 + meta_len + body_len
    if pos + length > end:
        return None
    return MessageInfo(pos, length, htype == _HEADER_RECORD_BATCH, batches)


def scan_messages(buf: memoryview, pos: int) -> list[MessageInfo]:
    """Every complete record batch message from `pos` on, stopping at the first incomplete one."""
    out: list[MessageInfo] = []
    while True:
        info = parse_message(buf, pos)
        if info is None:
            return out
        if info.is_record_batch:
            out.append(info)
        pos += info.length


def read_batch(buf: pa.Buffer, position: int, length: int,
               schema: pa.Schema = RECORD_SCHEMA) -> pa.RecordBatch:
    """The record batch of one message (of a data file whose schema is `schema`), zero-copy over `buf`."""
    return ipc.read_record_batch(buf.slice(position, length), schema)


def read_batches(buf: pa.Buffer, position: int, end: int, count: int, *,
                 schema_at: int | None = None, schema: pa.Schema = RECORD_SCHEMA,
                 schema_message: bytes = SCHEMA_MESSAGE) -> list[pa.RecordBatch]:
    """The record batches of the `count` consecutive messages in ``buf[position:end]``, zero-copy.
    When they are the first messages of their file (the schema message at `schema_at` directly
    before them), Arrow's stream reader walks them; otherwise its message reader does. Either costs
    about half of slicing out and reading each message."""
    return list(iter_batches(buf, position, end, count, schema_at=schema_at, schema=schema,
                             schema_message=schema_message))


def iter_batches(buf: pa.Buffer, position: int, end: int, count: int, *,
                 schema_at: int | None = None, schema: pa.Schema = RECORD_SCHEMA,
                 schema_message: bytes = SCHEMA_MESSAGE) -> Iterator[pa.RecordBatch]:
    """`read_batches`, each message decoded (decompressed) only when it is reached: a reader that
    lets each batch go before taking the next keeps one message's buffers in memory, which the
    allocator hands out again, instead of fresh pages for a whole segment."""
    if schema_at is not None and position == schema_at + len(schema_message):
        stream = ipc.open_stream(buf.slice(schema_at, end - schema_at), options=_READ_OPTIONS)
        return itertools.islice(stream, count)
    reader = ipc.MessageReader.open_stream(buf.slice(position, end - position))
    return (ipc.read_record_batch(message, schema) for message in itertools.islice(reader, count))


class FileBlockWriter:
    """Writes an Arrow IPC *file* to an fd, reporting where each record batch message lands."""

    def __init__(self, fd: int, codec: str | None = None) -> None:
        self._fd = fd
        self._sink = _Collect()
        self._writer = ipc.new_file(pa.PythonFile(self._sink, mode="w"), RECORD_SCHEMA,
                                    options=_WRITE_OPTIONS[codec])
        self._written = 0

    def _drain(self) -> int:
        chunks, self._sink.chunks = self._sink.chunks, []
        write_all(self._fd, chunks)
        n = sum(len(c) for c in chunks)
        self._written += n
        return n

    def write(self, batch: pa.RecordBatch, entries: bytes) -> tuple[int, int]:
        """Append one block; returns (position, length) of its message in the file."""
        lead = 0 if self._written else FILE_PREFIX  # the writer emits magic and schema lazily
        start = self._written + lead
        self._writer.write_batch(batch, custom_metadata={BATCHES_KEY: encode_entries(entries)})
        return start, self._drain() - lead

    def close(self) -> int:
        """Write the footer; returns the file size."""
        self._writer.close()
        self._drain()
        return self._written
