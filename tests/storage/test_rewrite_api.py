"""The segment-rewrite API background jobs use (``PartitionLog.rewrite``): claimed segments are
busy until the job ends, a rewrite replaces a segment with the same offsets, and a rewrite of a
segment truncated meanwhile is refused and its files discarded."""

from __future__ import annotations

from pathlib import Path

from pylog.storage import LogConfig, PartitionLog
from storage_helpers import meta_for, open_log, records

CFG = LogConfig(segment_bytes=2500)


def _log(fmt: int, tmp_path: Path, segments: int = 4) -> PartitionLog:
    log = open_log(fmt, tmp_path / "t-0", CFG, now_ms=0)
    while log.segment_count < segments:
        rb = records(3)
        log.append(rb, meta_for(rb), now_ms=0)
    return log


def test_nothing_chosen_yields_none_and_claims_nothing(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path)
    with log.rewrite(lambda segments: []) as job:
        assert job is None
    with log.rewrite(lambda segments: list(segments[:1])) as job:
        assert job is not None  # the job lock was released
    log.close()


def test_claimed_segments_are_busy_until_the_job_ends(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path)
    seen: list[tuple[bool, ...]] = []
    with log.rewrite(lambda segments: list(segments[1:3]), entries_after=True) as job:
        assert job is not None
        seen.append(tuple(s.busy for s in job.segments))
        assert job.end_offset == log.segment_base_offsets()[3]
        assert len(job.entries_after) and int(job.entries_after["base_offset"][0]) == job.end_offset
    assert seen == [(True, True)] and not any(s.busy for s in job.segments)
    log.close()


def test_a_replaced_segment_keeps_its_records_and_offsets(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path)
    before = log.read_table()
    with log.rewrite(lambda segments: [segments[0]]) as job:
        assert job is not None
        (seg,), (snap,) = job.segments, job.snapshots
        assert job.replace(seg, snap.blocks(), cleaned=True)
    assert log.read_table().equals(before)
    log.close()
    reopened = open_log(fmt, tmp_path / "t-0", CFG, now_ms=0)
    assert reopened.read_table().equals(before)
    reopened.close()


def test_a_segment_truncated_meanwhile_is_not_replaced(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path)
    last_closed = log.segment_base_offsets()[-2]
    with log.rewrite(lambda segments: [segments[-2]]) as job:
        assert job is not None
        (seg,), (snap,) = job.segments, job.snapshots
        log.truncate_to(last_closed)  # a follower meeting a new leader, while the job runs
        assert not job.replace(seg, snap.blocks())
    assert log.log_end_offset == last_closed
    assert not [p for p in (tmp_path / "t-0").iterdir() if p.name.endswith((".tmp", ".swap"))]
    log.close()
