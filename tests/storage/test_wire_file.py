"""The `.wire` side file of sealed segments: written when sealing and compacting, served as slices
of the mapped file, and dropped (reads fall back to encoding from Arrow) when missing or stale."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pylog.protocol import records as rec
from pylog.storage import BatchMeta, LogConfig, PartitionLog, Stats, read_segments
from pylog.storage.wire import WIRE_EXT, check_wire
from storage_helpers import meta_for, records


def encode(meta: BatchMeta, rows: pa.RecordBatch) -> bytes:
    return rec.encode_batch(
        rows,
        base_offset=meta.base_offset,
        attributes=meta.attributes,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        base_sequence=meta.base_sequence,
        partition_leader_epoch=meta.partition_leader_epoch,
        max_timestamp=meta.max_timestamp,
        base_timestamp=meta.base_timestamp,
        last_offset_delta=meta.last_offset_delta,
    )


# `.wire` files belong to format 1 (format 2 keeps the producers' bytes in its data file)
CFG = LogConfig(segment_bytes=3000, segment_format=1)


def _log(path: Path, cfg: LogConfig = CFG, *, batches: int = 12, encoder: bool = True) -> PartitionLog:
    log = PartitionLog.open(path, cfg, now_ms=0)
    if encoder:
        log.wire_encoder = encode
    for i in range(batches):
        rb = records(5, keys=[b"k%d" % (j % 3) for j in range(5)], value_size=40 + i)
        log.append(rb, meta_for(rb, leader_epoch=2), now_ms=i)
    assert log.seal_pending() >= 2
    return log


def _wires(path: Path) -> list[Path]:
    return sorted(path.glob(f"*{WIRE_EXT}"))


def _expected(log: PartitionLog, offset: int, max_bytes: int = 1 << 30) -> list[bytes]:
    return [encode(b.meta, b.records) for b in log.read(offset, max_bytes)]


def test_sealing_writes_the_wire_file_and_fetches_slice_it(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    sealed = log.segment_base_offsets()[:-1]
    assert [int(p.name[:20]) for p in _wires(tmp_path / "t-0")] == sealed
    got = log.read_wire(0, 1 << 30)
    want = _expected(log, 0)
    n_sealed = int(log.batch_metadata(0, log.segment_base_offsets()[-1])["base_offset"].size)
    assert all(type(b) is memoryview for b in got[:n_sealed])  # sealed: slices of the map
    assert all(type(b) is not memoryview for b in got[n_sealed:])  # active: rows to encode
    assert [bytes(b) for b in got[:n_sealed]] == want[:n_sealed]
    # the file is the batches back to back (a Kafka .log segment), each entry's size exact
    first = _wires(tmp_path / "t-0")[0]
    entries = log.batch_metadata(0, sealed[1])
    assert first.read_bytes() == b"".join(want[: len(entries)])
    assert entries["size"].tolist() == [len(b) for b in want[: len(entries)]]
    # the bytes decode to the stored records
    decoded = rec.decode_batch(bytes(got[1]))
    assert (
        decoded.records.column("value").to_pylist() == log.read(5, 1)[0].records.column("value").to_pylist()
    )
    log.close()


def test_slices_start_at_the_batch_holding_the_offset_and_respect_the_budget(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    want = _expected(log, 0)
    got = log.read_wire(7, len(want[1]) + len(want[2]))  # offset 7 is in the second batch
    assert [bytes(b) for b in got] == want[1:3]
    one = log.read_wire(7, 1)  # min_one: the first batch even if larger than the budget
    assert [bytes(b) for b in one] == want[1:2]
    assert log.read_wire(7, 1, min_one=False) == []
    upto = log.read_wire(0, 1 << 30, max_offset=10)  # only batches wholly below max_offset
    assert [bytes(b) for b in upto] == want[:2]
    log.close()


def test_missing_or_stale_wire_file_falls_back_to_encoding(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    want = _expected(log, 0)
    log.close()
    wires = _wires(path)
    wires[0].unlink()  # missing
    raw = bytearray(wires[1].read_bytes())
    raw[0:8] = (12345).to_bytes(8, "big")  # stale: the first batch's base offset is wrong
    wires[1].write_bytes(bytes(raw))
    wires[2].write_bytes(wires[2].read_bytes()[:-1])  # torn
    rejected = Stats.wire_rejected
    log = PartitionLog.open(path, CFG, now_ms=100)
    got = log.read_wire(0, 1 << 30)
    assert Stats.wire_rejected - rejected == 2
    bad = len(log.batch_metadata(0, int(wires[3].name[:20])))
    assert not any(type(b) is memoryview for b in got[:bad])  # those served from Arrow
    assert all(type(b) is memoryview for b in got[bad : bad + 2])  # the intact files still serve
    assert [bytes(b) if type(b) is memoryview else encode(b.meta, b.records) for b in got] == want
    log.close()


def test_check_wire_rejects_mismatches() -> None:
    rb = records(3)
    meta = meta_for(rb)
    data = encode(meta, rb)
    entries = np.zeros(1, [("base_offset", "<i8"), ("record_count", "<i4"), ("size", "<i4")])
    entries[0] = (0, 3, len(data))
    raw = np.frombuffer(data, np.uint8)
    assert check_wire(raw, entries).tolist() == [0, len(data)]  # type: ignore[union-attr]
    for field, value in (("base_offset", 1), ("record_count", 2), ("size", len(data) - 1)):
        bad = entries.copy()
        bad[field] = value
        assert check_wire(raw, bad) is None


def test_compaction_rewrites_the_wire_file(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=3000, cleanup_policy="compact", segment_format=1)
    log = _log(tmp_path / "t-0", cfg)
    before = log.read_table().num_rows
    log.compact(now_ms=10_000, force=True)
    assert log.read_table().num_rows < before
    end = log.segment_base_offsets()[-1]
    for wire in _wires(tmp_path / "t-0"):
        base = int(wire.name[:20])
        nxt = min(b for b in log.segment_base_offsets() if b > base)
        entries = log.batch_metadata(base, nxt)
        assert check_wire(np.frombuffer(wire.read_bytes(), np.uint8), entries) is not None
    got = log.read_wire(0, 1 << 30, max_offset=end)
    assert [bytes(b) for b in got] == _expected(log, 0)[: len(got)]
    assert all(type(b) is memoryview for b in got)
    log.close()


def test_compaction_without_an_encoder_drops_the_wire_file(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=3000, cleanup_policy="compact", segment_format=1)
    path = tmp_path / "t-0"
    log = _log(path, cfg)
    assert _wires(path)
    log.wire_encoder = None
    log.compact(now_ms=10_000, force=True)
    rewritten = [int(p.name[:20]) for p in _wires(path)]
    got = log.read_wire(0, 1 << 30)
    assert [encode(b.meta, b.records) if type(b) is not memoryview else bytes(b) for b in got] == _expected(
        log, 0
    )
    assert not rewritten  # every segment rewritten (a forced run cleans them all) lost its file
    log.close()


def test_truncation_and_deletion_remove_the_wire_file(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    bases = log.segment_base_offsets()
    log.truncate_to(bases[1] + 3)  # into the second sealed segment: rewritten as a stream
    assert [int(p.name[:20]) for p in _wires(path)] == bases[:1]
    assert [bytes(b) for b in log.read_wire(0, 1 << 30)] != []
    log.delete_records_before(bases[1])  # the first segment goes, with its .wire
    assert _wires(path) == []
    log.close()


def test_readers_of_the_data_dir_ignore_the_wire_file(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    table = log.read_table()
    log.close()
    assert _wires(path)
    assert read_segments(path).equals(table)
    ro = PartitionLog.open_readonly(path)
    assert not any(type(b) is memoryview for b in ro.read_wire(0, 1 << 30))
    ro.close()


def test_orphan_wire_file_is_removed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = _log(path)
    log.close()
    orphan = path / f"{99999:020d}{WIRE_EXT}"
    orphan.write_bytes(b"x")
    PartitionLog.open(path, CFG, now_ms=0).close()
    assert not orphan.exists()


@pytest.mark.parametrize("crash_after", [0, 3, 4])
def test_interrupted_swap_keeps_wire_and_batches_together(tmp_path: Path, crash_after: int) -> None:
    """A crash in the middle of swapping in a sealed segment: the files left agree."""
    from pylog.storage.rewrite import write_segment

    path = tmp_path / "t-0"
    log = _log(path)
    seg_base = log.segment_base_offsets()[0]
    snap_blocks = log._segments[0].snapshot().blocks()
    log.close()
    written = write_segment(path, seg_base, snap_blocks, sealed=True, wire=encode)
    order = written.order
    name = path / f"{seg_base:020d}"
    for ext in order:
        written.tmp[ext].rename(f"{name}{ext}.swap")
    for ext in order[:crash_after]:
        Path(f"{name}{ext}.swap").replace(f"{name}{ext}")
    log = PartitionLog.open(path, CFG, now_ms=0)
    log.wire_encoder = encode
    got = log.read_wire(0, 1 << 30)
    assert [bytes(b) if type(b) is memoryview else encode(b.meta, b.records) for b in got] == _expected(
        log, 0
    )
    assert type(got[0]) is memoryview
    log.close()


def test_topic_config_turns_the_wire_file_off(tmp_path: Path) -> None:
    assert LogConfig().segment_wire is True
    off = LogConfig.from_kafka({"pylog.segment.wire": "false", "segment.bytes": "3000",
                                "pylog.segment.format": "1"})
    assert off.segment_wire is False and off.to_kafka()["pylog.segment.wire"] == "false"
    with pytest.raises(ValueError, match="true or false"):
        LogConfig.from_kafka({"pylog.segment.wire": "yes"})
    log = _log(tmp_path / "t-0", off)
    assert _wires(tmp_path / "t-0") == []
    got = log.read_wire(0, 1 << 30)
    assert not any(type(b) is memoryview for b in got)
    log.close()
