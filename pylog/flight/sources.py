"""The scans DoGet and GetFlightInfo run: ``pylog.sdk``'s data-directory scan, read_committed as
``read_topic`` reads, or read_uncommitted: up to the high watermark, open and aborted transactions
included, control batches still dropped (as a read_uncommitted Kafka consumer sees the topic).

A partition with a remote tier is read as its leader sees it: the committed remote segments (the
broker's own view of them, from the metadata image, through its read cache) up to where the local
log takes over, the local segments after that."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pylog.flight.tickets import READ_COMMITTED
from pylog.sdk.dir_source import DirTopicSource
from pylog.sdk.offsets import TopicSource
from pylog.sdk.options import ReadOptions
from pylog.sdk.remote_source import RemoteStorageSpec
from pylog.sdk.scan import TopicScan

if TYPE_CHECKING:
    from pylog.storage.remote_segment import RemoteLog


class LeaderTier:
    """One partition's remote segments as its leader reads them, in the shape a `DirTopicSource`
    reads a remote tier. The broker owns the segments' cache: closing a read leaves it open."""

    def __init__(self, topic: str, partition: int, log: RemoteLog, uri: str) -> None:
        self.topic, self.partition, self.log = topic, partition, log
        self.spec = RemoteStorageSpec(uri)

    def partitions(self, topic: str) -> list[int]:
        return [self.partition] if topic == self.topic else []

    def remote_log(self, topic: str, partition: int) -> RemoteLog | None:
        return self.log if (topic, partition) == (self.topic, self.partition) else None

    def close(self) -> None:
        return None


class _LeaderScan(TopicScan):
    """A scan of the leader's log directory and, when the partition has one, its remote tier."""

    def __init__(self, topic: str, options: ReadOptions, tier: LeaderTier) -> None:
        super().__init__(topic, options)
        self.tier = tier

    def _source(self) -> TopicSource:
        return DirTopicSource(self.options.data_dir, remote=self.tier,
                              read_committed=self.options.read_committed)


def partition_scan(topic: str, partition: int, log_dir: Path, isolation: str, *,
                   start: int | None = None, end: int | None = None, start_ts: int | None = None,
                   end_ts: int | None = None, columns: Sequence[str] | None = None,
                   tier: LeaderTier | None = None) -> TopicScan:
    """The scan of one partition held in ``log_dir`` (a log directory of this broker), its remote
    segments first when ``tier`` names them."""
    options = ReadOptions(
        data_dir=log_dir, partitions=[partition], read_committed=isolation == READ_COMMITTED,
        starting_offsets="earliest" if start is None else {partition: start},
        ending_offsets="latest" if end is None else {partition: end},
        starting_timestamp=None if start_ts is None else {partition: start_ts},
        ending_timestamp=None if end_ts is None else {partition: end_ts},
        columns=columns,
    )
    return TopicScan(topic, options) if tier is None else _LeaderScan(topic, options, tier)
