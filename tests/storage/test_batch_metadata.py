"""Read-side access to the side files: read-only RecordFiles, PartitionLog.batch_metadata."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from pylog.storage import LogConfig, PartitionLog
from pylog.storage.files import RecordFile
from pylog.storage.schema import BATCH_DTYPE
from storage_helpers import meta_for, open_log, records


def _log(fmt: int, directory: Path, batches: int = 30, *, segment_bytes: int = 6_000) -> PartitionLog:
    log = open_log(fmt, directory, LogConfig(segment_bytes=segment_bytes), now_ms=0)
    for i in range(batches):
        rb = records(1 + i % 4, ts=1_000 + 10 * i)
        log.append(rb, meta_for(rb), now_ms=0)
    return log


def test_readonly_record_file_reads_entries_without_reopening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              fmt: int) -> None:
    log = _log(fmt, tmp_path / "t-0", segment_bytes=1 << 30)
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.batches"
    expected = np.fromfile(path, BATCH_DTYPE)
    opened: list[object] = []
    real_open = os.open

    def counting_open(p, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(p)
        return real_open(p, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    for copy in (False, True):  # sealed segments are mapped, active ones read whole
        f = RecordFile(path, BATCH_DTYPE, copy=copy, readonly=True)
        got = [f[i] for i in range(len(f))] + [f[-1]]
        assert np.array(got).tobytes() == np.concatenate([expected, expected[-1:]]).tobytes()
    assert opened == []


def _side_entries(directory: Path) -> np.ndarray:
    """Every `.batches` entry of a partition, straight from the files."""
    return np.concatenate([np.fromfile(p, BATCH_DTYPE) for p in sorted(directory.glob("*.batches"))])


def _overlapping(entries: np.ndarray, start: int, end: int) -> np.ndarray:
    last = entries["base_offset"] + entries["last_offset_delta"]
    return entries[(last >= start) & (entries["base_offset"] < end) & (start < end)]


def test_batch_metadata_over_ranges_and_segments(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path / "t-0", 60)
    assert log.seal_pending() >= 2 and log.segment_count >= 4
    everything = _side_entries(tmp_path / "t-0")
    assert log.batch_metadata().tobytes() == everything.tobytes()
    ro = PartitionLog.open_readonly(tmp_path / "t-0")
    end = log.log_end_offset
    rng = np.random.default_rng(3)
    for start, stop in [(0, end), (0, 1), (end - 1, end), (5, 5), (7, 3), (-4, end + 9), (end, end + 5),
                        *rng.integers(0, end + 1, size=(40, 2)).tolist()]:
        want = _overlapping(everything, max(start, 0), min(stop, end))
        for reader in (log, ro):
            got = reader.batch_metadata(start, stop)
            assert got.dtype == BATCH_DTYPE
            assert got.tobytes() == want.tobytes(), (start, stop)
    assert log.batch_metadata(end, None).dtype == BATCH_DTYPE and len(log.batch_metadata(end)) == 0
    ro.close()
    log.close()


def test_batch_metadata_is_a_copy_clipped_to_the_log_start(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path / "t-0", 20, segment_bytes=1 << 30)
    first = log.batch_metadata(0, 3)
    got = first.copy()
    for _ in range(5):
        rb = records(2)
        log.append(rb, meta_for(rb), now_ms=0)
    assert first.tobytes() == got.tobytes()
    log.delete_records_before(6)  # inside the batch holding offsets 6..8
    meta = log.batch_metadata()
    assert meta["base_offset"][0] == 6 and len(meta) == len(_side_entries(tmp_path / "t-0")) - 3
    assert log.batch_metadata(0, 7)["base_offset"].tolist() == [6]
    log.close()


def test_batch_metadata_filters_attributes(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", now_ms=0)
    kinds = [0, 0x10, 0, 0x30, 0x08, 0x10, 0x30, 0]
    for i, attrs in enumerate(kinds):
        rb = records(3 if attrs != 0x30 else 1)
        log.append(rb, meta_for(rb, producer_id=5 if attrs & 0x10 else -1, attributes=attrs), now_ms=i)
    got = log.batch_metadata(attributes=0x30)
    assert got["attributes"].tolist() == [0x10, 0x30, 0x10, 0x30]
    assert got["producer_id"].tolist() == [5] * 4
    assert log.batch_metadata(attributes=0x20)["base_offset"].tolist() == [9, 16]
    assert log.batch_metadata(4, 11, attributes=0x08)["base_offset"].tolist() == [10]
    assert len(log.batch_metadata(4, 10, attributes=0x08)) == 0
    log.close()


def test_batch_metadata_reads_only_segments_in_range(tmp_path: Path, fmt: int) -> None:
    from pylog.storage import Stats

    log = _log(fmt, tmp_path / "t-0", 60)
    log.seal_pending()
    bases = log.segment_base_offsets()
    log.close()
    for base in bases[:-2]:  # lost side files are rebuilt from the data, if anything looks at them
        for ext in (".batches", ".index", ".timeindex"):
            (tmp_path / "t-0" / f"{base:020d}{ext}").unlink()
    ro = PartitionLog.open_readonly(tmp_path / "t-0")
    rebuilds = Stats.index_rebuilds
    got = ro.batch_metadata(bases[-2], bases[-2] + 3)
    assert got["base_offset"][0] == bases[-2] and Stats.index_rebuilds == rebuilds
    assert len(ro.batch_metadata(0, 1)) == 1 and Stats.index_rebuilds == rebuilds + 1
    ro.close()


def test_scan_clips_to_the_range(tmp_path: Path, fmt: int) -> None:
    log = _log(fmt, tmp_path / "t-0", 60)
    log.seal_pending()
    log.delete_records_before(3)
    end = log.log_end_offset
    rng = np.random.default_rng(5)
    ranges = [(0, end), (4, 5), (end - 1, end + 3), *rng.integers(0, end + 1, size=(30, 2)).tolist()]
    for start, stop in ranges:
        rows = [o for rb in log.scan(start, stop) for o in rb.column(0).to_pylist()]
        assert rows == list(range(max(start, 3), min(stop, end))), (start, stop)
        assert all(rb.num_rows for rb in log.scan(start, stop))
    log.close()


def test_a_side_file_replaced_by_a_shorter_one_reads_as_vanished(tmp_path: Path, fmt: int) -> None:
    """Sealing swaps in side files with fewer entries; a reader that sized the old file must see
    it as gone (FileNotFoundError, which readers answer by reopening), not a short read."""
    log = _log(fmt, tmp_path / "t-0", segment_bytes=1 << 30)
    log.close()
    path = tmp_path / "t-0" / f"{0:020d}.batches"
    entries = np.fromfile(path, BATCH_DTYPE)
    readers = [RecordFile(path, BATCH_DTYPE, copy=copy, readonly=True) for copy in (True, False)]
    RecordFile(path, BATCH_DTYPE).replace(entries[:2].tobytes())
    for reader in readers:  # read whole (an active segment) and mapped (a sealed one)
        with pytest.raises(FileNotFoundError, match="fewer than the 30 entries"):
            reader.entries()
    reopened = RecordFile(path, BATCH_DTYPE, copy=True, readonly=True)
    assert reopened.entries().tobytes() == entries[:2].tobytes()


def test_a_listing_taken_mid_swap_is_refused_not_read_with_a_hole(tmp_path: Path, fmt: int) -> None:
    """Between a swap's unlink of a segment's old data file and the rename of its new one, the
    directory lists no data for that segment; a read-only view must not open without it."""
    log = _log(fmt, tmp_path / "t-0", 60)
    assert log.seal_pending() >= 2
    log.close()
    def offsets() -> list[int]:
        return PartitionLog.open_readonly(tmp_path / "t-0").read_table().column("offset").to_pylist()

    everything = offsets()
    sealed = sorted((tmp_path / "t-0").glob("*.arrow"))[1]
    swap = sealed.with_name(sealed.name + ".swap")
    sealed.rename(swap)  # the old data file gone, the new one not yet in place
    with pytest.raises(FileNotFoundError, match="being rewritten"):
        offsets()
    swap.rename(sealed)
    assert offsets() == everything
