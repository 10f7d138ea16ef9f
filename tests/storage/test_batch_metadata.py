"""Read-side access to the side files: read-only RecordFiles, PartitionLog.batch_metadata."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from pylog.storage import LogConfig, PartitionLog
from pylog.storage.files import RecordFile
from pylog.storage.schema import BATCH_DTYPE
from storage_helpers import meta_for, records


def _log(directory: Path, batches: int = 30, *, segment_bytes: int = 6_000) -> PartitionLog:
    log = PartitionLog.open(directory, LogConfig(segment_bytes=segment_bytes), now_ms=0)
    for i in range(batches):
        rb = records(1 + i % 4, ts=1_000 + 10 * i)
        log.append(rb, meta_for(rb), now_ms=0)
    return log


def test_readonly_record_file_reads_entries_without_reopening(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    log = _log(tmp_path / "t-0", segment_bytes=1 << 30)
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
