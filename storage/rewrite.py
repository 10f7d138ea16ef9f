"""Writing whole segments (sealing, compaction, truncation) and swapping them in atomically.

New files are written under temporary names, fsynced, then swapped in by renames in a fixed order:
every `<base>.<ext>.swap` first (`.index`, `.timeindex`, `.batches`, `.wire` when written, data),
then each `.swap` onto its final name in the same order, the replaced data file (other extension)
being unlinked just before the new one lands. A rewrite without a `.wire` file unlinks the old one
before any rename, so a `.wire` never outlives the batches it was written for, except sealing,
which keeps the `.wire` the active segment wrote when it holds exactly the segment's batches
(they match the old and the new `.batches` alike, so a swap interrupted anywhere leaves it
valid). `recover_swaps` finishes or undoes an interrupted swap on open: if `<base>.index.swap`
still exists the final renames had not begun and the `.swap` files are dropped, otherwise the
remaining renames are completed.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import onecopy as oc
from .files import fsync_dir
from .ipc import SCHEMA_MESSAGE, FileBlockWriter, block_kafka_codec, body_codec, encode_message, write_all
from .schema import BATCH_DTYPE, metas_from_entries
from .segment import (
    BATCHES_EXT,
    FILE_EXT,
    INDEX_EXT,
    STREAM_EXT,
    TIME_EXT,
    segment_name,
    side_entries,
)
from .wire import WIRE_EXT, WireEncoder, encode_block

TARGET_BLOCK_ROWS = 1 << 20
TARGET_BLOCK_BYTES = 16 << 20
SWAP_ORDER = (INDEX_EXT, TIME_EXT, BATCHES_EXT)
_counter = itertools.count()
SWAP_RE = re.compile(r"^(\d{20})(\.[a-z]+)\.swap$")  # <base>.<ext>.swap

Block = tuple[pa.RecordBatch, np.ndarray]  # rows and their BATCH_DTYPE entries (row relative to rows)


def coalesce(blocks: list[Block], *, max_rows: int = TARGET_BLOCK_ROWS,
             max_bytes: int = TARGET_BLOCK_BYTES) -> list[Block]:
    """Merge consecutive blocks into bigger ones (never splitting a Kafka batch)."""
    out: list[Block] = []
    group: list[Block] = []
    rows = size = 0

    def close() -> None:
        if not group:
            return
        if len(group) == 1:
            out.append(group[0])
        else:
            parts, base = [], 0
            for rb, e in group:
                e = e.copy()
                e["row"] += base
                base += rb.num_rows
                parts.append(e)
            out.append((pa.concat_batches([rb for rb, _ in group]), np.concatenate(parts)))
        group.clear()

    for rb, e in blocks:
        n = rb.get_total_buffer_size()
        if group and (rows + rb.num_rows > max_rows or size + n > max_bytes):
            close()
            rows = size = 0
        group.append((rb, e))
        rows += rb.num_rows
        size += n
    close()
    return out


class Written:
    """Temporary files of one rewritten segment, ready to be swapped in."""

    def __init__(self, directory: Path, base_offset: int, sealed: bool, data_size: int,
                 tmp: dict[str, Path], *, keep_wire: bool = False) -> None:
        self.directory = directory
        self.keep_wire = keep_wire  # the segment's `.wire` already holds these batches
        self.base_offset = base_offset
        self.sealed = sealed
        self.data_size = data_size
        self.tmp = tmp

    @property
    def data_ext(self) -> str:
        return FILE_EXT if self.sealed else STREAM_EXT

    @property
    def order(self) -> tuple[str, ...]:
        return (*SWAP_ORDER, *((WIRE_EXT,) if WIRE_EXT in self.tmp else ()), self.data_ext)

    def discard(self) -> None:
        for p in self.tmp.values():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def commit(self) -> None:
        """Swap the files in (the caller holds the log's lock)."""
        name = self.directory / segment_name(self.base_offset)
        order = self.order
        if WIRE_EXT not in self.tmp and not self.keep_wire:
            try:
                os.unlink(f"{name}{WIRE_EXT}")
            except FileNotFoundError:
                pass
        for ext in order:
            os.replace(self.tmp[ext], f"{name}{ext}.swap")
        fsync_dir(self.directory)
        _finish_swap(self.directory, self.base_offset, order)
        fsync_dir(self.directory)


def _finish_swap(directory: Path, base_offset: int, order: tuple[str, ...]) -> None:
    name = directory / segment_name(base_offset)
    for ext in order:
        swap = Path(f"{name}{ext}.swap")
        if not swap.exists():
            continue
        if ext in (FILE_EXT, STREAM_EXT):
            other = STREAM_EXT if ext == FILE_EXT else FILE_EXT
            try:
                os.unlink(f"{name}{other}")
            except FileNotFoundError:
                pass
        os.replace(swap, f"{name}{ext}")


def recover_swaps(directory: Path) -> None:
    """Complete or undo swaps interrupted by a crash; remove temporary files."""
    pending: dict[int, set[str]] = {}
    for entry in os.scandir(directory):
        if entry.name.endswith(".tmp"):
            os.unlink(entry.path)
            continue
        m = SWAP_RE.match(entry.name)
        if m:
            pending.setdefault(int(m.group(1)), set()).add(m.group(2))
    for base, exts in pending.items():
        if INDEX_EXT in exts:
            for ext in exts:
                os.unlink(directory / f"{segment_name(base)}{ext}.swap")
        else:
            data = [e for e in (FILE_EXT, STREAM_EXT) if e in exts]
            _finish_swap(directory, base, (*SWAP_ORDER, WIRE_EXT, *data))
    if pending:
        fsync_dir(directory)


def _tmp(directory: Path, base_offset: int, ext: str) -> Path:
    return directory / f"{segment_name(base_offset)}{ext}.{os.getpid()}-{next(_counter)}.tmp"


def _write_raw(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        write_all(fd, [data])
        os.fsync(fd)
    finally:
        os.close(fd)


def write_segment(directory: Path, base_offset: int, blocks: list[Block], *, sealed: bool,
                  compression: str = "producer", wire: WireEncoder | None = None,
                  keep_wire: bool = False) -> Written:
    """Write `blocks` as a new sealed (IPC file) or active (IPC stream) segment under temporary
    names; each block's entries get their message number, and are embedded in the message.
    Bodies are compressed per `compression` (`pylog.segment.compression`): a stream per block, a
    file (one codec throughout) by what most of its records were produced with. A sealed segment
    written with a `wire` encoder also gets its `.wire` file (each batch's `size` its length);
    with `keep_wire` the segment's present `.wire` (checked by the caller) stays in place."""
    ext = FILE_EXT if sealed else STREAM_EXT
    wire = wire if sealed else None
    exts = (*SWAP_ORDER, *((WIRE_EXT,) if wire is not None else ()), ext)
    tmp = {e: _tmp(directory, base_offset, e) for e in exts}
    placed: list[tuple[int, int, np.ndarray]] = []
    fd = os.open(tmp[ext], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    wire_fd = os.open(tmp[WIRE_EXT], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644) if wire else None
    try:
        if sealed:
            every = np.concatenate([e for _, e in blocks]) if blocks else np.empty(0, BATCH_DTYPE)
            largest = max((rb.get_total_buffer_size() for rb, _ in blocks), default=0)
            writer = FileBlockWriter(fd, body_codec(compression, block_kafka_codec(every), largest))
            for m, (rb, e) in enumerate(blocks):
                e = e.copy()
                e["message"] = m
                if wire is not None and wire_fd is not None:
                    write_all(wire_fd, encode_block(wire, rb, e, metas_from_entries(e)))
                pos, length = writer.write(rb, e.tobytes())
                placed.append((pos, length, e))
            size = writer.close()
            if wire_fd is not None:
                os.fsync(wire_fd)
        else:
            write_all(fd, [SCHEMA_MESSAGE])
            size = len(SCHEMA_MESSAGE)
            for m, (rb, e) in enumerate(blocks):
                e = e.copy()
                e["message"] = m
                codec = body_codec(compression, block_kafka_codec(e), rb.get_total_buffer_size())
                message = encode_message(rb, e.tobytes(), codec)
                write_all(fd, [message])
                placed.append((size, message.size, e))
                size += message.size
        os.fsync(fd)
    finally:
        os.close(fd)
        if wire_fd is not None:
            os.close(wire_fd)
    index_raw, times_raw = side_entries(placed)
    batches_raw = b"".join(e.tobytes() for _, _, e in placed) if placed else b""
    for side_ext, raw in ((INDEX_EXT, index_raw), (TIME_EXT, times_raw), (BATCHES_EXT, batches_raw)):
        _write_raw(tmp[side_ext], raw)
    assert len(batches_raw) % BATCH_DTYPE.itemsize == 0
    return Written(directory, base_offset, sealed, size, tmp, keep_wire=keep_wire and wire is None)


def write_rows_segment(directory: Path, base_offset: int, messages: list[oc.Rows], *,
                       sealed: bool) -> Written:
    """Write format 2 `messages` (one Arrow message each; sections as stored) as a new sealed (IPC
    file) or active (IPC stream) segment under temporary names, then its side files. The file is
    gathered into one buffer and written at once: written straight from the mapped sources as many
    iovecs, the same bytes were 2-3x slower for a reader's first touch of the new mapping."""
    ext = FILE_EXT if sealed else STREAM_EXT
    tmp = {e: _tmp(directory, base_offset, e) for e in (*SWAP_ORDER, ext)}
    encoded = []
    for m, rows in enumerate(messages):
        rows.entries["message"] = m
        encoded.append(oc.encode_message(rows))
    chunks = oc.file_chunks(encoded) if sealed else oc.stream_chunks(encoded)
    pos = (8 if sealed else 0) + len(oc.SCHEMA_V2_MESSAGE)
    placed: list[tuple[int, int, np.ndarray]] = []
    for rows, msg in zip(messages, encoded):
        placed.append((pos, msg.length, rows.entries))
        pos += msg.length
    data = b"".join(chunks)
    _write_raw(tmp[ext], data)
    index_raw, times_raw = side_entries(placed)
    batches_raw = b"".join(e.tobytes() for _, _, e in placed)
    for side_ext, raw in ((INDEX_EXT, index_raw), (TIME_EXT, times_raw), (BATCHES_EXT, batches_raw)):
        _write_raw(tmp[side_ext], raw)
    return Written(directory, base_offset, sealed, len(data), tmp)
