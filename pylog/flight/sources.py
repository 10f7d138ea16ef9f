"""The scans DoGet and GetFlightInfo run: ``pylog.sdk``'s data-directory scan, read_committed as
``read_topic`` reads, or read_uncommitted: up to the high watermark, open and aborted transactions
included, control batches still dropped (as a read_uncommitted Kafka consumer sees the topic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pylog.flight.tickets import READ_COMMITTED
from pylog.model import CONTROL_MASK
from pylog.sdk.dir_source import DirTopicSource, _Partition
from pylog.sdk.scan import TopicScan


class _UncommittedPartition(_Partition):
    """A partition read up to its high watermark, skipping only control batches."""

    @property
    def last_stable(self) -> int:
        return self.high_watermark

    def dropped(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        control = self.log.batch_metadata(start, end, attributes=CONTROL_MASK)
        first = control["base_offset"]
        return first, first + control["last_offset_delta"]


class _UncommittedSource(DirTopicSource):
    def _partition(self, topic: str, partition: int, *, reopen: bool = False) -> _Partition:
        part = super()._partition(topic, partition, reopen=reopen)
        if not isinstance(part, _UncommittedPartition):
            part = self._open[(topic, partition)] = _UncommittedPartition(part.log, part.high_watermark)
        return part


class _UncommittedScan(TopicScan):
    def _source(self) -> Any:
        return _UncommittedSource(self.data_dir)


def partition_scan(topic: str, partition: int, log_dir: Path, isolation: str, *,
                   start: int | None = None, end: int | None = None, start_ts: int | None = None,
                   end_ts: int | None = None, columns: Sequence[str] | None = None) -> TopicScan:
    """The scan of one partition held in ``log_dir`` (a log directory of this broker)."""
    kind = TopicScan if isolation == READ_COMMITTED else _UncommittedScan
    return kind(
        topic, data_dir=log_dir, partitions=[partition],
        starting_offsets="earliest" if start is None else {partition: start},
        ending_offsets="latest" if end is None else {partition: end},
        starting_timestamp=None if start_ts is None else {partition: start_ts},
        ending_timestamp=None if end_ts is None else {partition: end_ts},
        columns=columns,
    )
