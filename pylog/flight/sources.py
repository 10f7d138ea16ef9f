"""The scans DoGet and GetFlightInfo run: ``pylog.sdk``'s data-directory scan, read_committed as
``read_topic`` reads, or read_uncommitted: up to the high watermark, open and aborted transactions
included, control batches still dropped (as a read_uncommitted Kafka consumer sees the topic).

A partition with a remote tier is read as its leader sees it: the committed remote segments (the
broker's own view of them, from the metadata image, through its read cache) up to where the local
log takes over, the local segments after that.

A DoGet or GetFlightInfo opens only the partitions it reads (never listing the log directory, which
may hold thousands), each once: its plan and its read share one view."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from pylog.flight.tickets import READ_COMMITTED
from pylog.sdk.dir_source import DirTopicSource, RemoteSegments
from pylog.sdk.offsets import PartitionRange, TopicSource
from pylog.sdk.options import ReadOptions
from pylog.sdk.remote_source import RemoteStorageSpec
from pylog.sdk.scan import TopicScan

if TYPE_CHECKING:
    from pylog.storage.remote_segment import RemoteLog


class LeaderTier:
    """One partition's remote segments as its leader reads them, in the shape a `DirTopicSource`
    reads a remote tier. The broker owns the segments' cache: closing a read leaves it open.

    The segments are looked up when the source first asks, which it does after opening the local
    log: a segment leaves the local log only once the store holds it, so the two then meet (looked
    up before, an upload and a local deletion in between would leave a gap)."""

    def __init__(self, topic: str, partition: int, resolve: Callable[[], RemoteLog | None], uri: str) -> None:
        self.topic, self.partition, self._resolve = topic, partition, resolve
        self._log: RemoteLog | None = None
        self._resolved = False
        self.spec = RemoteStorageSpec(uri)

    def partitions(self, topic: str) -> list[int]:
        return [self.partition] if topic == self.topic else []

    def remote_log(self, topic: str, partition: int) -> RemoteLog | None:
        if (topic, partition) != (self.topic, self.partition):
            return None
        if not self._resolved:  # once: one source, one view
            self._log, self._resolved = self._resolve(), True
        return self._log

    def refresh(self, topic: str, partition: int) -> RemoteLog | None:
        self._resolved = False
        return self.remote_log(topic, partition)

    def close(self) -> None:
        return None


class _LeaderTiers:
    """The remote segments of several partitions, each as its leader reads it (one `LeaderTier` each)."""

    def __init__(self, tiers: Sequence[LeaderTier]) -> None:
        self.tiers = list(tiers)
        self.spec = self.tiers[0].spec

    def partitions(self, topic: str) -> list[int]:
        return sorted({p for tier in self.tiers for p in tier.partitions(topic)})

    def remote_log(self, topic: str, partition: int) -> RemoteLog | None:
        logs = (tier.remote_log(topic, partition) for tier in self.tiers)
        return next((log for log in logs if log is not None), None)

    def refresh(self, topic: str, partition: int) -> RemoteLog | None:
        logs = (t.refresh(topic, partition) for t in self.tiers if t.partitions(topic) == [partition])
        return next((log for log in logs if log is not None), None)

    def close(self) -> None:
        return None


def leader_source(topic: str, partitions: Sequence[int], log_dir: Path, isolation: str,
                  tiers: Sequence[LeaderTier] = ()) -> DirTopicSource:
    """A source over ``partitions`` of ``topic`` held in ``log_dir`` (a log directory of this
    broker) and their remote ``tiers``: only those partitions' directories are looked at, each
    opened once however often the source is asked (one view for a plan and its read)."""
    remote: RemoteSegments | None = None
    if tiers:
        remote = tiers[0] if len(tiers) == 1 else _LeaderTiers(tiers)
    return DirTopicSource(log_dir, remote=remote, read_committed=isolation == READ_COMMITTED,
                          only=[(topic, p) for p in partitions])


class _Borrowed:
    """A source a scan reads without closing it: its owner closes it after the scan's reads."""

    def __init__(self, source: DirTopicSource) -> None:
        self.source = source

    def partitions(self, topic: str) -> list[int]:
        return self.source.partitions(topic)

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return self.source.offset_bounds(topic, partitions)

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        return self.source.offsets_for_times(topic, times)

    def read(self, ranges: list[PartitionRange], columns: Sequence[str]
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        return self.source.read(ranges, columns)

    def close(self) -> None:
        return None


class _LeaderScan(TopicScan):
    """A scan of one partition through a source its caller owns (`leader_source`)."""

    def __init__(self, topic: str, options: ReadOptions, source: DirTopicSource) -> None:
        super().__init__(topic, options)
        self.source = source

    def _source(self) -> TopicSource:
        return _Borrowed(self.source)


def partition_scan(topic: str, partition: int, source: DirTopicSource, isolation: str, *,
                   start: int | None = None, end: int | None = None, start_ts: int | None = None,
                   end_ts: int | None = None, columns: Sequence[str] | None = None) -> TopicScan:
    """The scan of one partition of ``source`` (a `leader_source`); planning and reading it open
    nothing more."""
    assert source.root is not None  # a leader's log directory
    options = ReadOptions(
        data_dir=source.root, partitions=[partition], read_committed=isolation == READ_COMMITTED,
        starting_offsets="earliest" if start is None else {partition: start},
        ending_offsets="latest" if end is None else {partition: end},
        starting_timestamp=None if start_ts is None else {partition: start_ts},
        ending_timestamp=None if end_ts is None else {partition: end_ts},
        columns=columns,
    )
    return _LeaderScan(topic, options, source)
