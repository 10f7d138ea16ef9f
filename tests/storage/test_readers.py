"""Sealed segments read by other Arrow readers, and opening many partitions without touching data."""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pytest
from pylog.storage import MAPPED_SEGMENTS, RECORD_SCHEMA, LogConfig, PartitionLog, Stats, list_partitions
from pylog.storage import onecopy as oc
from storage_helpers import meta_for, open_log, records


def _sealed_log(fmt: int, directory: Path) -> PartitionLog:
    log = open_log(fmt, directory, LogConfig(segment_bytes=20_000), now_ms=0)
    rng = np.random.default_rng(7)
    for i in range(40):
        n = int(rng.integers(1, 30))
        keys = [None if j % 7 == 3 else b"key-%d" % (j % 5) for j in range(n)]
        values = [None if j % 11 == 4 else rng.bytes(int(rng.integers(0, 300))) for j in range(n)]
        rb = records(n, ts=1_700_000_000_000 + i * 1000, keys=keys, values=values, headers=bool(i % 2))
        log.append(rb, meta_for(rb), now_ms=0)
    assert log.seal_pending() >= 2
    return log


def test_sealed_segments_read_by_pyarrow_polars_duckdb(tmp_path: Path, fmt: int) -> None:
    log = _sealed_log(fmt, tmp_path / "t-0")
    sealed = sorted(tmp_path.glob("t-0/*.arrow"))
    assert len(sealed) == log.segment_count - 1
    bases = log.segment_base_offsets()
    for k, path in enumerate(sealed):
        expected = log.read_table(bases[k], bases[k + 1])
        with pa.memory_map(str(path)) as source:
            table = ipc.open_file(source).read_all()
        if fmt == 2:  # view types, read by the same readers; as RECORD_SCHEMA they are the records
            assert table.schema.equals(oc.SCHEMA_V2, check_metadata=True)
            table = pa.Table.from_batches([oc.to_record_schema(b) for b in table.to_batches()], RECORD_SCHEMA)
        assert table.schema.equals(RECORD_SCHEMA)
        assert table.equals(expected)
        frame = pl.read_ipc(path)
        assert frame.equals(pl.from_arrow(expected))
        via_log = [b.records for b in log.read(bases[k], 1 << 30, max_offset=bases[k + 1])]
        assert pa.Table.from_batches(via_log).equals(expected)
    # DuckDB scans the sealed files as an Arrow dataset (its own IPC reader is an optional extension).
    dataset = ds.dataset([str(p) for p in sealed], format="arrow")  # noqa: F841 (read by DuckDB by name)
    got = duckdb.sql("SELECT \"offset\", key, value FROM dataset ORDER BY \"offset\"").arrow()
    if isinstance(got, pa.RecordBatchReader):
        got = got.read_all()
    want = log.read_table(0, bases[-1]).select(["offset", "key", "value"])
    assert got.equals(want)
    stats = duckdb.sql("SELECT count(*), count(DISTINCT key) FROM dataset").fetchall()
    assert stats == [(want.num_rows, 5)]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mapped(directory: Path) -> set[str]:
    maps = Path("/proc/self/maps").read_text()
    return {m for m in re.findall(r"(/\S+)$", maps, flags=re.M) if m.startswith(str(directory))}


@pytest.mark.parametrize("fmt", [1])  # opening reads no data whatever the format: one is enough
def test_opening_many_partitions_reads_no_sealed_data(tmp_path: Path, fmt: int) -> None:
    data = tmp_path / "data"
    cfg = LogConfig(segment_bytes=6000)
    template = tmp_path / "template" / "events-0"
    log = open_log(fmt, template, cfg, now_ms=0)
    for _ in range(12):
        rb = records(20, value_size=40)
        log.append(rb, meta_for(rb), now_ms=0)
    log.seal_pending()
    assert log.segment_count >= 3
    expected = log.read_table()
    log.close()
    files = {p.name: p.read_bytes() for p in template.iterdir()}
    for i in range(300):
        d = data / f"events-{i}"
        d.mkdir(parents=True)
        for name, content in files.items():
            (d / name).write_bytes(content)
    maps_before, sealed_before, fds_before = Stats.data_maps, Stats.sealed_maps, _fds()
    logs = [open_log(fmt, p.path, cfg, now_ms=0) for p in list_partitions(data)]
    assert len(logs) == 300
    assert Stats.sealed_maps == sealed_before and Stats.data_maps == maps_before
    assert _fds() <= fds_before  # no descriptor is kept open by an idle partition
    assert not _mapped(data)
    assert all(lg.log_end_offset == 240 for lg in logs)
    # a read maps only what it touches, and the LRU bounds how many sealed segments stay mapped
    limit = MAPPED_SEGMENTS.limit
    MAPPED_SEGMENTS.limit = 8
    try:
        assert logs[5].read_table().equals(expected)
        assert len({p.rsplit("/", 2)[-2] for p in _mapped(data)}) == 1
        for lg in logs[:20]:
            lg.read(0, 1)
        assert len([p for p in _mapped(data) if p.endswith(".arrow")]) <= 8 + 1
    finally:
        MAPPED_SEGMENTS.limit = limit
    for lg in logs:
        lg.close()
    assert _fds() <= fds_before
