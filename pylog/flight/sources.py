"""The scans DoGet and GetFlightInfo run: ``pylog.sdk``'s data-directory scan, read_committed as
``read_topic`` reads, or read_uncommitted: up to the high watermark, open and aborted transactions
included, control batches still dropped (as a read_uncommitted Kafka consumer sees the topic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pylog.flight.tickets import READ_COMMITTED
from pylog.sdk.scan import TopicScan


def partition_scan(topic: str, partition: int, log_dir: Path, isolation: str, *,
                   start: int | None = None, end: int | None = None, start_ts: int | None = None,
                   end_ts: int | None = None, columns: Sequence[str] | None = None) -> TopicScan:
    """The scan of one partition held in ``log_dir`` (a log directory of this broker)."""
    return TopicScan(
        topic, data_dir=log_dir, partitions=[partition], read_committed=isolation == READ_COMMITTED,
        starting_offsets="earliest" if start is None else {partition: start},
        ending_offsets="latest" if end is None else {partition: end},
        starting_timestamp=None if start_ts is None else {partition: start_ts},
        ending_timestamp=None if end_ts is None else {partition: end_ts},
        columns=columns,
    )
