"""Small durable checkpoints of a partition: the leader epoch cache and the log start offset.

Both use Kafka's checkpoint text layout (a version line, an entry count line, one entry per line)
and are replaced atomically (temporary file, fsync, rename) on every change. A truncation of the
leader epoch cache is written without the fsync, as Kafka does: opening the log truncates the cache
to the log again, so a truncation lost in a crash is redone, and opening thousands of partitions
does not wait for thousands of disk flushes. The truncations of opening are not even written then:
the next change of the cache, or closing the log, writes them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path

from .files import write_file

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"


def read_checkpoint(path: Path) -> list[list[int]]:
    """Entries of a checkpoint file ([] when missing); raises ValueError when malformed."""
    try:
        lines = path.read_text().split("\n")
    except FileNotFoundError:
        return []
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"{path}: unknown checkpoint version")
    n = int(lines[1])
    entries = [[int(x) for x in line.split()] for line in lines[2:2 + n]]
    if len(entries) != n:
        raise ValueError(f"{path}: {len(entries)} entries, header says {n}")
    return entries


def write_checkpoint(path: Path, entries: Sequence[tuple[int, ...]], *, sync: bool = True) -> None:
    body = "".join(" ".join(str(x) for x in e) + "\n" for e in entries)
    write_file(path, f"0\n{len(entries)}\n{body}".encode(), sync=sync)


class LeaderEpochCache:
    """Kafka's LeaderEpochFileCache: (epoch, start offset) pairs with increasing epochs and offsets.

    `assign` records that `epoch` began at `start_offset` (dropping entries it contradicts);
    `end_offset_for` answers OffsetsForLeaderEpoch; truncation keeps the cache in line with the log.
    """

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._unwritten = False  # a truncation left for the next write (opening's)
        self.epochs: list[int] = []
        self.offsets: list[int] = []
        for epoch, offset in read_checkpoint(path):
            self.epochs.append(epoch)
            self.offsets.append(offset)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.epochs, self.offsets))

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def _flush(self, *, sync: bool = True) -> None:
        """Write the cache; ``sync=False`` for a truncation (redone when the log opens)."""
        if not self.readonly:
            write_checkpoint(self.path, self.entries(), sync=sync)
            self._unwritten = False

    def _truncated(self, defer: bool) -> None:
        if defer:
            self._unwritten = True
        else:
            self._flush(sync=False)

    def write_pending(self) -> None:
        """Write a truncation left for later (``defer=True``), if any."""
        if self._unwritten:
            self._flush(sync=False)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed."""
        if epoch < 0:
            return False
        if self.epochs and epoch == self.epochs[-1] and start_offset >= self.offsets[-1]:
            return False
        keep = [i for i in range(len(self.epochs))
                if self.epochs[i] < epoch and self.offsets[i] < start_offset]
        self.epochs = [self.epochs[i] for i in keep] + [epoch]
        self.offsets = [self.offsets[i] for i in keep] + [start_offset]
        self._flush()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the start offset of the first later epoch or the log end
        offset for the latest epoch), or (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)."""
        if epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self.epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self.epochs, epoch)
        if higher == len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:  # older than anything we know: the start of the first known epoch
            return epoch, self.offsets[0]
        return self.epochs[higher - 1], self.offsets[higher]

    def truncate_from_end(self, end_offset: int, *, defer: bool = False) -> None:
        """Drop epochs starting at or after `end_offset` (the log was truncated there); `defer`:
        write it with the next change or `write_pending` (opening a log, which redoes it)."""
        n = bisect.bisect_left(self.offsets, end_offset)
        if n < len(self.offsets):
            del self.epochs[n:], self.offsets[n:]
            self._truncated(defer)

    def truncate_from_start(self, start_offset: int, *, defer: bool = False) -> None:
        """Forget epochs wholly below `start_offset`; the one spanning it now starts there."""
        n = bisect.bisect_right(self.offsets, start_offset)
        if n == 0 or (n == 1 and self.offsets[0] == start_offset):
            return
        del self.epochs[:n - 1], self.offsets[:n - 1]
        self.offsets[0] = start_offset
        self._truncated(defer)

    def clear(self) -> None:
        if self.epochs:
            self.epochs, self.offsets = [], []
            self._flush()


def read_log_start_offset(directory: Path) -> int:
    entries = read_checkpoint(directory / LOG_START_OFFSET_FILE)
    return entries[0][0] if entries else 0


def write_log_start_offset(directory: Path, offset: int) -> None:
    write_checkpoint(directory / LOG_START_OFFSET_FILE, [(offset,)])


HIGH_WATERMARK_FILE = "replication-offset-checkpoint"


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's OffsetCheckpointFile (``replication-offset-checkpoint``): version, count, then
    ``topic partition offset`` per line; {} when missing or unreadable."""
    try:
        lines = path.read_text().split("\n")
    except FileNotFoundError:
        return {}
    out: dict[tuple[str, int], int] = {}
    if len(lines) < 2 or lines[0].strip() != "0":
        return out
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3:
            try:
                out[(parts[0], int(parts[1]))] = int(parts[2])
            except ValueError:
                continue
    return out


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    write_file(path, f"0\n{len(offsets)}\n{body}".encode())
