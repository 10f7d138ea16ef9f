"""A data-directory reader whose segments change under it: the broker seals the stream files it
listed, or retention deletes them, between the reader's open and its read. The reader reopens the
partition and resumes after the last offset it returned: every record once, in order."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pylog.storage import BatchMeta, LogConfig, PartitionLog
from sdk_helpers import T0, LogWriter, rows

from pylog.sdk.dir_source import DirTopicSource
from pylog.sdk.offsets import PartitionRange

ROWS = 5000  # more than one coalesced batch per message, so the reader yields between segments


def _writer(tmp_path: Path, messages: int) -> LogWriter:
    w = LogWriter(tmp_path, "t", segment_bytes=4096)
    for _ in range(messages):
        w.append(ROWS)
    return w


def test_a_stream_sealed_mid_read_is_read_from_its_sealed_file(tmp_path: Path) -> None:
    w = _writer(tmp_path, 4)
    assert not list(tmp_path.glob("t-0/*.arrow"))  # every segment still a stream file
    with DirTopicSource(tmp_path) as source:
        reader = source.read([PartitionRange("t", 0, 0, w.end)], ["offset", "value"])
        first = next(reader)[1]
        assert w.log.seal_pending() >= 3  # the broker seals: the .stream files the view named go
        assert list(tmp_path.glob("t-0/*.arrow"))
        rest = [b for _r, b in reader]
    offsets = pa.Table.from_batches([first, *rest]).column("offset").to_pylist()
    assert offsets == list(range(w.end))
    w.close()


def test_a_table_read_after_the_view_was_opened_and_its_files_sealed(tmp_path: Path) -> None:
    w = _writer(tmp_path, 3)
    with DirTopicSource(tmp_path) as source:
        bounds = source.offset_bounds("t", [0])  # the view is fixed here
        w.log.seal_pending()
        [(_r, table)] = list(source.read_tables([PartitionRange("t", 0, *bounds[0])], ["offset"]))
    assert table.column("offset").to_pylist() == list(range(w.end))
    w.close()


def test_segments_deleted_mid_read_resume_at_the_new_log_start(tmp_path: Path) -> None:
    w = _writer(tmp_path, 4)
    w.log.seal_pending()
    with DirTopicSource(tmp_path) as source:
        reader = source.read([PartitionRange("t", 0, 0, w.end)], ["offset"])
        first = next(reader)[1]
        w.log.delete_records_before(3 * ROWS)  # DeleteRecords: the first three segments go
        rest = [b for _r, b in reader]
    offsets = pa.Table.from_batches([first, *rest]).column("offset").to_pylist()
    assert offsets == sorted(set(offsets))  # nothing twice, in order
    assert offsets[: first.num_rows] == list(range(first.num_rows))
    assert offsets[-ROWS:] == list(range(3 * ROWS, 4 * ROWS))
    w.close()



def _append_keyed(log: PartitionLog, n: int, keys: int) -> None:
    """n records whose keys repeat every ``keys`` records (so compaction has work)."""
    start = log.log_end_offset
    batch = rows(start, n)
    batch = batch.set_column(2, "key", pa.array([b"k%d" % (i % keys) for i in range(start, start + n)],
                                                pa.binary()))
    meta = BatchMeta(base_offset=start, last_offset_delta=n - 1, record_count=n, base_timestamp=T0 + start,
                     max_timestamp=T0 + start + n - 1, producer_id=-1, producer_epoch=0)
    log.append(batch, meta, now_ms=0)


def test_a_segment_compacted_under_the_view_is_read_again_from_its_new_file(tmp_path: Path) -> None:
    """Compaction writes a smaller file under the same name: the view's inode and size no longer
    match the file, so the reader reopens and reads the compacted log."""
    config = LogConfig(segment_bytes=2500, cleanup_policy="compact", delete_retention_ms=1000)
    log = PartitionLog.open(tmp_path / "c-0", config, now_ms=0)
    for _ in range(8):
        _append_keyed(log, 40, keys=10)
    log.seal_pending()
    end = log.log_end_offset
    with DirTopicSource(tmp_path) as source:
        assert source.offset_bounds("c", [0]) == {0: (0, end)}  # the view is fixed here
        assert log.compact(now_ms=10_000).segments > 0
        [(_r, table)] = list(source.read_tables([PartitionRange("c", 0, 0, end)], ["offset", "key"]))
    offsets = table.column("offset").to_pylist()
    assert offsets == sorted(set(offsets)) and len(offsets) < end  # the compacted log, once
    assert offsets == log.read_table().column("offset").to_pylist()
    log.close()


def test_planning_after_segments_were_deleted_under_the_view(tmp_path: Path) -> None:
    """The planner's questions on a view whose segments retention deleted after it was opened
    (the last stable offset reads every segment's batch metadata): answered from a fresh view."""
    w = _writer(tmp_path, 4)
    w.log.seal_pending()
    with DirTopicSource(tmp_path) as source:
        last = PartitionRange("t", 0, 3 * ROWS, w.end)
        assert source.reads_as_stored(last)  # the view is opened here; it read the last segment's metadata
        w.log.delete_records_before(3 * ROWS)  # the first three segments go
        assert source.offset_bounds("t", [0]) == {0: (3 * ROWS, w.end)}
        [(_r, table)] = list(source.read_tables([last], ["offset"]))
    assert table.column("offset").to_pylist() == list(range(3 * ROWS, w.end))
    w.close()
