"""The `.wire` side file: every Kafka batch's RecordBatch v2 bytes, ready to send.

A fetch of history that the broker's recent-batches cache no longer holds would otherwise encode
each batch again from its Arrow rows. The bytes are written, in `.batches` order and back to back,
to `<base>.wire`, the layout of a Kafka `.log` segment; each batch's `.batches` `size` is its exact
length there, so batch *i* starts at the sum of the sizes before it. The active segment appends
each batch's bytes as the broker has them (the producer's, patched; a follower's, the leader's),
and sealing keeps that file when it matches every batch; otherwise (compaction, a file torn by a
crash, a batch appended without its bytes) sealing encodes each batch once. A fetch of a sealed
segment maps the file and slices it. The file is optional: a segment without it (older segments,
a file that does not match its `.batches`) is served by encoding from Arrow as before.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from .schema import BatchMeta

WIRE_EXT = ".wire"
WireBytes = bytes | bytearray | memoryview
WireEncoder = Callable[[BatchMeta, pa.RecordBatch], bytes]
"""RecordBatch v2 bytes of one stored batch (its metadata and rows); given by the broker."""
WireSource = Callable[[BatchMeta], WireBytes]
"""RecordBatch v2 bytes of the batch being appended, given its stored metadata (offsets,
epoch and append time as the log assigned them); the broker has them from the producer."""

# byte positions in a RecordBatch v2 header (big-endian fields)
_BATCH_LENGTH_AT = 8
_RECORD_COUNT_AT = 57
_HEADER_SIZE = 61


def wire_starts(entries: np.ndarray) -> np.ndarray:
    """Byte position of each batch in the `.wire` file, and its end as the last element."""
    starts = np.zeros(len(entries) + 1, np.int64)
    np.cumsum(entries["size"], dtype=np.int64, out=starts[1:])
    return starts


def _field(raw: np.ndarray, at: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """The big-endian integer of `width` bytes at each position `at` of `raw`, vectorised."""
    idx = at[:, None] + np.arange(width, dtype=np.int64)
    return np.ascontiguousarray(raw[idx]).view(dtype).reshape(-1)


def check_wire(raw: np.ndarray, entries: np.ndarray) -> np.ndarray | None:
    """The batch positions (see `wire_starts`) if `raw` (the file's bytes as uint8) holds exactly
    the batches `entries` (BATCH_DTYPE) describe: total size, and per batch its base offset,
    length and record count in the header; None otherwise (stale, torn or foreign)."""
    n = len(entries)
    starts = wire_starts(entries)
    if int(starts[-1]) != len(raw) or (n and int(entries["size"].min()) < _HEADER_SIZE):
        return None
    if n == 0:
        return starts
    at = starts[:-1]
    if not (
        np.array_equal(_field(raw, at, 8, ">i8"), entries["base_offset"])
        and np.array_equal(_field(raw, at + _BATCH_LENGTH_AT, 4, ">i4") + 12, entries["size"])
        and np.array_equal(_field(raw, at + _RECORD_COUNT_AT, 4, ">i4"), entries["record_count"])
    ):
        return None
    return starts


def map_wire(path: Path) -> memoryview | None:
    """The file mapped read-only (an empty view for an empty file), or None if it is missing."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    finally:
        os.close(fd)


def encode_block(
    encode: WireEncoder, rb: pa.RecordBatch, entries: np.ndarray, metas: list[BatchMeta]
) -> list[bytes]:
    """Wire bytes of each batch of one block (rows `rb`, its `entries`); sets each entry's `size`
    to its encoded length. One call per Kafka batch, none per record."""
    rows = entries["row"].tolist()
    out = [encode(meta, rb.slice(row, meta.record_count)) for meta, row in zip(metas, rows)]
    entries["size"] = [len(b) for b in out]
    return out


def active_wire_matches(path: Path, entries: np.ndarray) -> bool:
    """Whether the `.wire` at `path`, kept by a segment while it was active, holds exactly the
    batches `entries` describe (then sealing keeps it and encodes nothing); it is fsynced then,
    as the sealed files are."""
    view = map_wire(path)
    if view is None or check_wire(np.frombuffer(view, np.uint8), entries) is None:
        return False
    del view
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True
