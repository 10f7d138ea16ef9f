"""Compaction rules, and background jobs running while the owner appends and reads."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
from pylog.storage import LogConfig, PartitionLog
from storage_helpers import CONTROL, TRANSACTIONAL, meta_for, open_log, records

CFG = LogConfig(segment_bytes=2500, cleanup_policy="compact", delete_retention_ms=1000)


def _rows(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    t = log.read_table()
    return list(zip(*(t.column(c).to_pylist() for c in ("offset", "key", "value"))))


def _put(log: PartitionLog, keys: list[bytes], values: list[bytes | None], *, now_ms: int = 0,
         **meta: int) -> None:
    rb = records(len(keys), keys=keys, values=values)  # type: ignore[arg-type]
    log.append(rb, meta_for(rb, **meta), now_ms=now_ms)


def test_latest_per_key_tombstones_and_offsets(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", CFG, now_ms=0)
    _put(log, [b"a", b"b", b"c"], [b"a1", b"b1", b"c1"])
    _put(log, [b"a", b"b"], [b"a2", None])  # b deleted
    _put(log, [b"c", b"a"], [b"c2", b"a3"])
    while log.segment_count < 3:
        _put(log, [b"z"], [b"filler"])
    active = log.segment_base_offsets()[-1]
    before = _rows(log)
    log.compact(now_ms=10_000)
    rows = _rows(log)
    cleaned = [r for r in rows if r[0] < active]
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys))  # one record per key in the cleaned range
    assert (4, b"b", None) in cleaned  # the tombstone stays until its delete horizon
    assert (6, b"a", b"a3") in cleaned and (5, b"c", b"c2") in cleaned
    assert [r for r in rows if r[0] >= active] == [r for r in before if r[0] >= active]
    # batch metadata still maps offsets: base offset and last offset delta survive
    metas = [b.meta for b in log.read(0, 1 << 20)]
    assert all(m.record_count <= m.last_offset_delta + 1 for m in metas)
    assert (metas[0].base_offset, metas[0].last_offset) == (3, 4)
    log.compact(now_ms=10_500)  # horizon is 11_000: still there
    assert (4, b"b", None) in _rows(log)
    log.compact(now_ms=11_000)
    assert all(k != b"b" for _, k, _ in _rows(log))
    log.close()
    reopened = open_log(fmt, tmp_path / "t-0", CFG, now_ms=0)
    assert _rows(reopened) == _rows(log)


def test_control_batches_and_producer_state_survive(tmp_path: Path, fmt: int) -> None:
    log = open_log(fmt, tmp_path / "t-0", CFG, now_ms=0)
    _put(log, [b"a"], [b"1"], producer_id=5, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL)
    _put(log, [b"\x00\x00\x00\x01"], [b"\x00\x00\x00\x00\x00\x00"], producer_id=5, producer_epoch=0,
         attributes=CONTROL | TRANSACTIONAL)
    _put(log, [b"a"], [b"2"], producer_id=6, producer_epoch=0, base_sequence=0)
    _put(log, [b"a"], [b"3"], producer_id=6, producer_epoch=0, base_sequence=1)
    _put(log, [b"a"], [b"4"], producer_id=7, producer_epoch=0, base_sequence=0)
    log.roll()
    _put(log, [b"q"], [b"q"])
    log.compact(now_ms=0)
    metas = {m.base_offset: m for m in (b.meta for b in log.read(0, 1 << 20))}
    assert metas[1].is_control and metas[1].record_count == 1  # transaction marker kept
    assert 0 not in metas  # producer 5's last batch is its marker, so its emptied data batch goes
    assert 2 not in metas  # producer 6's earlier batch is gone, its last one stays empty
    assert metas[3].record_count == 0 and metas[3].base_sequence == 1
    assert metas[4].record_count == 1
    assert [r for r in _rows(log) if r[0] < 5] == [(1, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"),
                                                   (4, b"a", b"4")]


def test_compaction_respects_lag_and_bound(tmp_path: Path, fmt: int) -> None:
    cfg = LogConfig(segment_bytes=2500, cleanup_policy="compact", min_compaction_lag_ms=500)
    log = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)
    for i in range(12):
        rb = records(2, keys=[b"k", b"k"], ts=i * 100)
        log.append(rb, meta_for(rb), now_ms=0)
    before = _rows(log)
    assert log.compact(now_ms=0).segments == 0  # every segment is younger than the lag
    assert log.compact(now_ms=10_000, max_offset=0).segments == 0  # nothing below the bound
    assert log.compact(now_ms=10_000).segments > 0
    assert len(_rows(log)) < len(before)


def test_background_seal_and_compaction_while_appending_and_reading(tmp_path: Path, fmt: int) -> None:
    cfg = LogConfig(segment_bytes=4000, cleanup_policy="compact,delete", retention_ms=-1)
    log = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def background() -> None:
        try:
            while not stop.is_set():
                log.seal_pending()
                log.compact(now_ms=0)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    worker = threading.Thread(target=background)
    worker.start()
    latest: dict[bytes, tuple[int, bytes]] = {}
    try:
        for i in range(300):
            keys = [b"k%d" % ((i * 3 + j) % 17) for j in range(3)]
            values = [b"v%d-%d" % (i, j) for j in range(3)]
            rb = records(3, keys=keys, values=values)  # type: ignore[arg-type]
            stored = log.append(rb, meta_for(rb), now_ms=0)
            for j, k in enumerate(keys):
                latest[k] = (stored.base_offset + j, values[j])
            got = log.read(max(0, stored.base_offset - 20), 1 << 16)
            assert got and got[-1].meta.base_offset == stored.base_offset
            offs = pa.concat_arrays([b.records.column("offset") for b in got]).to_pylist()
            assert offs == sorted(offs)
    finally:
        stop.set()
        worker.join()
    assert not errors
    log.seal_pending()
    log.compact(now_ms=0)
    rows = _rows(log)
    assert {k: (o, v) for o, k, v in rows if (o, v) == latest[k]} == latest  # the latest value of every key
    log.close()
    reopened = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)
    assert _rows(reopened) == rows
    assert all(s.sealed for s in reopened._segments[:-1])


def test_runs_only_when_due(tmp_path: Path, fmt: int) -> None:
    cfg = LogConfig(segment_bytes=2500, cleanup_policy="compact", min_cleanable_dirty_ratio=0.5)
    log = open_log(fmt, tmp_path / "t-0", cfg, now_ms=0)

    def fill(segments: int) -> None:
        target = log.segment_count + segments
        while log.segment_count < target:
            _put(log, [b"k%d" % (log.log_end_offset % 5)], [b"v" * 100])

    fill(6)
    assert log.compact(now_ms=0).segments > 0
    assert log.compact(now_ms=0)[:3] == (0, 0, 0)  # nothing dirty since
    fill(1)
    assert log.compact(now_ms=0)[:3] == (0, 0, 0)  # one dirty segment of many: below the ratio
    assert log.compact(now_ms=0, force=True).records_before > 0
    fill(8)
    assert log.compact(now_ms=0).segments > 0
    lag_cfg = LogConfig(segment_bytes=2500, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0,
                        max_compaction_lag_ms=1000)
    lagging = open_log(fmt, tmp_path / "t-1", lag_cfg, now_ms=0)
    for i in range(40):
        rb = records(1, keys=[b"k"], value_size=100)
        lagging.append(rb, meta_for(rb), now_ms=i)
    lagging.compact(now_ms=0, force=True)
    lagging.roll()
    rb = records(1, keys=[b"k"], value_size=100)
    lagging.append(rb, meta_for(rb), now_ms=100)
    lagging.roll()
    assert lagging.compact(now_ms=500)[:3] == (0, 0, 0)
    assert lagging.compact(now_ms=1100).records_before > 0  # the dirty segment outlived the max lag
