"""PartitionLog with the remote tier: two starts (the log start offset, possibly remote, and the
local log start), local deletion that keeps the log start, retention that never moves it past what
is remote, reads below the local start refused, and both starts recovered after a restart."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pylog.storage import LogConfig, OffsetOutOfRange, PartitionLog

sys.path.insert(0, str(Path(__file__).parent.parent / "storage"))
from storage_helpers import meta_for, records

TIERED = LogConfig(segment_bytes=2000, remote_storage_enable=True, retention_ms=1, retention_bytes=1)


def filled(path: Path, config: LogConfig) -> PartitionLog:
    log = PartitionLog.open(path, config, now_ms=0)
    for _ in range(30):
        rb = records(5, value_size=100)
        log.append(rb, meta_for(rb), now_ms=0)
    log.seal_pending()
    assert len(log.segment_infos()) > 4
    return log


def test_local_deletion_keeps_the_log_start_and_restarts_recover_both(tmp_path: Path) -> None:
    log = filled(tmp_path / "t-0", TIERED)
    infos = log.segment_infos()
    assert all(i.sealed for i in infos[:-1]) and not infos[-1].sealed
    assert [f.suffix for f in infos[0].files] == [".arrow", ".index", ".timeindex", ".batches"]
    cut = infos[3].base_offset
    assert log.delete_local_segments(cut) == 3
    assert log.log_start_offset == 0 and log.local_log_start_offset == cut
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 1000)
    assert log.read(cut, 100)[0].meta.base_offset == cut
    # retention (retention.ms=1, retention.bytes=1) never deletes a remote-enabled log's segments
    assert log.apply_retention(10**12) == 0
    log.close()
    again = PartitionLog.open(tmp_path / "t-0", TIERED, now_ms=0)
    assert again.log_start_offset == 0 and again.local_log_start_offset == cut
    # DeleteRecords into the remote range moves the log start only
    assert again.delete_records_before(5) == 5 and again.local_log_start_offset == cut
    again.close()


def test_without_the_remote_tier_retention_works_as_before(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2000, retention_ms=1)
    log = filled(tmp_path / "t-0", config)
    assert log.apply_retention(10**12) > 0
    assert log.log_start_offset == log.local_log_start_offset > 0
    log.close()


def test_a_follower_starts_over_at_the_tiered_offset_keeping_the_leaders_start(tmp_path: Path) -> None:
    log = filled(tmp_path / "t-0", TIERED)
    log.truncate_fully_and_start_at(500, log_start_offset=40)
    assert log.log_start_offset == 40 and log.local_log_start_offset == 500 and log.log_end_offset == 500
    log.close()
    again = PartitionLog.open(tmp_path / "t-0", TIERED, now_ms=0)
    assert again.log_start_offset == 40 and again.local_log_start_offset == 500
    again.close()
