"""Reading a topic straight from a pylog data directory: the Arrow segments, no broker.

Partitions are ``<data_dir>/<topic>-<partition>`` directories opened with
``PartitionLog.open_readonly``, which is safe while a broker appends, rolls or seals them (a torn tail
is ignored; the view is fixed at open). What a reader may see matches a read_committed Kafka fetch:

- The high watermark is the log end offset of complete batches (a single-replica broker's high
  watermark), capped by Kafka's ``replication-offset-checkpoint`` in the data directory when a
  replicating broker writes one.
- The last stable offset is the first offset of the earliest transaction without a marker below the
  high watermark; ``latest`` means that offset.
- Control batches never become rows, and a transactional batch is dropped when its producer's next
  marker is an ABORT.

The batches (metadata and rows, from ``PartitionLog.read``) are listed once per partition to learn all
three; rows are zero-copy slices of the mapped segments (runs of small batches are concatenated)
and unrequested columns are never touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from pylog.protocol.records import parse_control_record
from pylog.sdk.constant import int32_column
from pylog.sdk.offsets import PartitionRange, UnknownTopicError
from pylog.storage import PartitionLog, StoredBatch, list_partitions

HW_CHECKPOINT = "replication-offset-checkpoint"
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_ALL = 1 << 62
SMALL_BATCH_ROWS = 4096
COALESCED_ROWS = 65536


@dataclass
class _Partition:
    """A partition's read-only log and what its batch metadata says."""

    log: PartitionLog
    log_start: int
    high_watermark: int
    last_stable: int
    batches: list[StoredBatch]
    starts: np.ndarray  # base offset per batch
    keep: np.ndarray  # per batch: a committed data batch


def read_hw_checkpoint(data_dir: Path) -> dict[tuple[str, int], int]:
    """Kafka's ``replication-offset-checkpoint`` (version, count, then ``topic partition offset``)."""
    try:
        lines = (data_dir / HW_CHECKPOINT).read_text().splitlines()
    except FileNotFoundError:
        return {}
    out: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out


class DirTopicSource:
    """`OffsetSource` + reader over a data directory; each partition is opened once per source, so one
    source (one scan) sees one consistent view."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = Path(data_dir)
        if not self.root.is_dir():
            raise FileNotFoundError(f"data_dir {str(self.root)!r} is not a directory")
        self._dirs = {(p.topic, p.partition): p.path for p in list_partitions(self.root)}
        self._hw = read_hw_checkpoint(self.root)
        self._open: dict[tuple[str, int], _Partition] = {}

    def __enter__(self) -> DirTopicSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for part in self._open.values():
            part.log.close()
        self._open.clear()

    def partitions(self, topic: str) -> list[int]:
        found = sorted(p for (t, p) in self._dirs if t == topic)
        if not found:
            topics = sorted({t for (t, _p) in self._dirs if not t.startswith("__")})
            raise UnknownTopicError(f"unknown topic {topic!r}: {str(self.root)!r} holds "
                                    + (", ".join(map(repr, topics)) if topics else "no topics"))
        return found

    def _partition(self, topic: str, partition: int) -> _Partition:
        part = self._open.get((topic, partition))
        if part is None:
            path = self._dirs.get((topic, partition))
            if path is None:
                raise UnknownTopicError(f"topic {topic!r} has no partition {partition} in {str(self.root)!r}")
            part = self._open[(topic, partition)] = _load(PartitionLog.open_readonly(path),
                                                          self._hw.get((topic, partition)))
        return part

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        out = {}
        for p in partitions:
            part = self._partition(topic, p)
            out[p] = (part.log_start, part.last_stable)
        return out

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        for p, ts in times.items():
            part = self._partition(topic, p)
            found = part.log.offset_for_timestamp(ts, max_offset=part.last_stable)
            out[p] = None if found is None else found[0]
        return out

    def read(self, ranges: list[PartitionRange], columns: Sequence[str]
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        for r in ranges:
            if r.count <= 0:
                continue
            part = self._partition(r.topic, r.partition)
            for batch in _rows(part, r, columns):
                yield r, batch


def _load(log: PartitionLog, hw_checkpoint: int | None) -> _Partition:
    log_start = log.log_start_offset
    hw = log.log_end_offset if hw_checkpoint is None else min(hw_checkpoint, log.log_end_offset)
    batches = log.read(log_start, _ALL, max_offset=hw) if hw > log_start else []
    attrs = np.fromiter((b.meta.attributes for b in batches), np.int16, len(batches))
    special = (attrs & (_TRANSACTIONAL | _CONTROL)) != 0
    keep = np.ones(len(batches), bool)
    last_stable = hw
    if special.any():
        keep, last_stable = _transactions(batches, np.flatnonzero(special), hw)
    starts = np.fromiter((b.meta.base_offset for b in batches), np.int64, len(batches))
    return _Partition(log, log_start, hw, last_stable, batches, starts, keep)


def _transactions(batches: list[StoredBatch], special: np.ndarray, hw: int) -> tuple[np.ndarray, int]:
    """(committed-data mask per batch, last stable offset): a transaction's batches are dropped when
    its producer's next marker is ABORT; a transaction with no marker yet bounds the stable offset."""
    keep = np.ones(len(batches), bool)
    pending: dict[int, list[int]] = {}  # producer id -> batches of its open transaction
    first: dict[int, int] = {}  # producer id -> first offset of its open transaction
    for i in special.tolist():
        meta = batches[i].meta
        pid = meta.producer_id
        if meta.is_control:
            keep[i] = False
            rows = batches[i].records
            if rows.num_rows:
                marker = parse_control_record(rows.column("key")[0].as_py(), rows.column("value")[0].as_py())
                if marker.is_abort:
                    keep[pending.get(pid, [])] = False
            pending.pop(pid, None)
            first.pop(pid, None)
        else:
            pending.setdefault(pid, []).append(i)
            first.setdefault(pid, meta.base_offset)
    return keep, min([hw, *first.values()])


def _rows(part: _Partition, r: PartitionRange, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """The committed data batches overlapping [start, end), clipped, as zero-copy slices of the mapped
    segments; runs of small batches (a producer sending a few records at a time) become one batch."""
    lo = max(0, int(np.searchsorted(part.starts, r.start, "right")) - 1)
    hi = int(np.searchsorted(part.starts, r.end, "left"))
    stored = [c for c in columns if c != "timestampType"]
    with_type = "timestampType" in columns
    run: list[pa.RecordBatch] = []
    run_rows = 0
    for i in range(lo, hi):
        if not part.keep[i]:
            continue
        meta, rows = part.batches[i]
        if meta.base_offset < r.start or meta.last_offset >= r.end:
            a, b = np.searchsorted(rows.column(0).to_numpy(), [r.start, r.end])
            rows = rows.slice(int(a), int(b - a))
        n = rows.num_rows
        if n == 0:
            continue
        if meta.timestamp_type == 1 and "timestamp" in stored:
            # LogAppendTime: the broker's time, kept in max_timestamp, is every record's timestamp
            append_time = pa.repeat(pa.scalar(meta.max_timestamp, pa.timestamp("ms")), n)
            rows = rows.set_column(1, "timestamp", append_time)
        out = rows.select(stored)
        if with_type:
            out = out.append_column("timestampType", int32_column(meta.timestamp_type, n))
        if n >= SMALL_BATCH_ROWS:
            if run:
                yield _concat(run)
                run, run_rows = [], 0
            yield out
            continue
        run.append(out)
        run_rows += n
        if run_rows >= COALESCED_ROWS:
            yield _concat(run)
            run, run_rows = [], 0
    if run:
        yield _concat(run)


def _concat(run: list[pa.RecordBatch]) -> pa.RecordBatch:
    return run[0] if len(run) == 1 else pa.concat_batches(run)
