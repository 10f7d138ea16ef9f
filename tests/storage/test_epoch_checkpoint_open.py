"""Opening a log truncates its leader epoch cache to the log without writing the file then (a
restart of thousands of partitions would write thousands of files): the next change of the cache
or closing the log writes it, and a crash before that is harmless since every open truncates again."""

from __future__ import annotations

from pathlib import Path

from pylog.storage import PartitionLog
from pylog.storage.checkpoint import LEADER_EPOCH_FILE, read_checkpoint


def test_opening_truncates_epochs_in_memory_and_close_or_the_next_change_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = PartitionLog.open(path, now_ms=0)
    log.assign_leader_epoch(3, 0)  # an epoch that began at the (empty) log's end
    log.close()
    assert read_checkpoint(path / LEADER_EPOCH_FILE) == [[3, 0]]

    log = PartitionLog.open(path, now_ms=0)
    assert log.epoch_entries() == []  # no records of epoch 3: truncated on open
    assert read_checkpoint(path / LEADER_EPOCH_FILE) == [[3, 0]]  # not written yet
    log.close()
    assert read_checkpoint(path / LEADER_EPOCH_FILE) == []

    log = PartitionLog.open(path, now_ms=0)
    log.assign_leader_epoch(4, 0)  # a change writes the cache, truncation included
    assert read_checkpoint(path / LEADER_EPOCH_FILE) == [[4, 0]]
    log.close()


def test_a_log_never_closed_leaves_the_file_and_the_next_open_truncates_again(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = PartitionLog.open(path, now_ms=0)
    log.assign_leader_epoch(2, 0)
    log.close()
    crashed = PartitionLog.open(path, now_ms=0)  # the process dies before closing it
    assert read_checkpoint(path / LEADER_EPOCH_FILE) == [[2, 0]]
    reopened = PartitionLog.open(path, now_ms=0)
    assert reopened.epoch_entries() == []
    for log in (crashed, reopened):
        log.close()
