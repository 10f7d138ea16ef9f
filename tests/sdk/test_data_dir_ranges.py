"""Data-directory reads of offset ranges against a model of what a read_committed consumer sees:
interleaved transactions, markers after the range, LogAppendTime batches, several segments; and
what planning and reading a range may touch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pylog.storage import Stats
from sdk_helpers import T0, LogWriter, write_topic_dir

import pylog
from pylog.sdk.constant import CHUNK_ROWS, ConstantPool, int32_column, string_column
from pylog.sdk.dir_source import DirTopicSource
from pylog.sdk.offsets import PartitionRange


class Model:
    """Per offset: visible to a committed reader or not, and its timestamp / timestamp type."""

    def __init__(self, data_dir: Path, seed: int) -> None:
        self.w = LogWriter(data_dir, "tx", 0, segment_bytes=3_000)
        self.visible: dict[int, bool] = {}
        self.ts: dict[int, tuple[int, int]] = {}
        self.pending: dict[int, list[int]] = {}  # producer -> offsets of its open transaction
        rng = np.random.default_rng(seed)
        for _ in range(120):
            pid = int(rng.integers(1, 5))
            kind = rng.random()
            if kind < 0.35:
                self.data(int(rng.integers(1, 6)), lat=rng.random() < 0.2)
            elif kind < 0.8 or pid not in self.pending:
                self.data(int(rng.integers(1, 6)), pid=pid)
            else:
                self.marker(pid, commit=rng.random() < 0.5)
        for pid in (1, 2):  # transactions left open: the last stable offset stops at the first
            if pid not in self.pending:
                self.data(2, pid=pid)

    def data(self, n: int, *, pid: int = -1, lat: bool = False) -> None:
        first, end = self.w.append(n, producer_id=pid, transactional=pid >= 0, attributes=0x08 if lat else 0)
        for o in range(first, end):
            self.visible[o] = pid < 0
            self.ts[o] = (T0 + end - 1, 1) if lat else (T0 + o, 0)
        if pid >= 0:
            self.pending.setdefault(pid, []).extend(range(first, end))

    def marker(self, pid: int, *, commit: bool) -> None:
        self.visible[self.w.marker(pid, commit=commit)] = False
        for o in self.pending.pop(pid, []):
            self.visible[o] = commit

    @property
    def last_stable(self) -> int:
        return min(offs[0] for offs in self.pending.values())

    def rows(self, start: int, end: int) -> list[tuple[int, int, int]]:
        return [(o, *self.ts[o]) for o in range(start, end) if self.visible[o]]


def _rows(table: pa.Table) -> list[tuple[int, int, int]]:
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    return list(zip(table.column("offset").to_pylist(), ts, table.column("timestampType").to_pylist()))


@pytest.mark.parametrize("seed", [1, 2])
def test_ranges_match_a_committed_reader(tmp_path: Path, seed: int) -> None:
    model = Model(tmp_path, seed)
    model.w.log.seal_pending()
    model.w.close()
    lso = model.last_stable
    assert pylog.scan_topic("tx", data_dir=tmp_path).plan()[0].end == lso
    assert _rows(pylog.read_topic("tx", data_dir=tmp_path)) == model.rows(0, lso)
    rng = np.random.default_rng(seed)
    for a, b in [(0, 1), (lso - 1, lso), *np.sort(rng.integers(0, lso + 1, size=(25, 2))).tolist()]:
        table = pylog.read_topic("tx", data_dir=tmp_path, starting_offsets={"0": a}, ending_offsets={"0": b})
        assert _rows(table) == model.rows(a, b), (a, b)
        with DirTopicSource(tmp_path) as source:  # a Spark task: the range alone, no planning
            got = [batch for _r, batch in source.read([PartitionRange("tx", 0, a, b)],
                                                      ["offset", "timestamp", "timestampType"])]
            assert (_rows(pa.Table.from_batches(got)) if got else []) == model.rows(a, b), (a, b)


def test_reading_a_range_touches_only_its_segments(tmp_path: Path) -> None:
    w = LogWriter(tmp_path, "big", 0, segment_bytes=4_000)
    for i in range(80):
        if i % 10 == 9:
            w.marker(7, commit=True)
        else:
            w.append(5, producer_id=7 if i % 10 > 5 else -1, transactional=i % 10 > 5)
    w.log.seal_pending()
    bases = w.log.segment_base_offsets()
    w.close()
    maps = Stats.data_maps
    plan = pylog.scan_topic("big", data_dir=tmp_path, starting_offsets={"0": 30},
                            ending_offsets={"0": 40}).plan()
    assert [(r.start, r.end) for r in plan] == [(30, 40)] and Stats.data_maps == maps  # no record read
    assert len(bases) > 6
    for base in bases[:-3]:  # a read of the last segments never looks at these side files
        for ext in (".batches", ".index", ".timeindex"):
            (tmp_path / "big-0" / f"{base:020d}{ext}").unlink()
    rebuilds = Stats.index_rebuilds
    start = bases[-3]
    with DirTopicSource(tmp_path) as source:
        batches = [b for _r, b in source.read([PartitionRange("big", 0, start, start + 12)], ["offset"])]
    offsets = pa.Table.from_batches(batches).column("offset").to_pylist()
    assert offsets and all(start <= o < start + 12 for o in offsets)
    assert Stats.index_rebuilds == rebuilds


def test_constant_columns() -> None:
    for n in (0, 1, 2, 3, 7, 4096, 100_001):
        assert string_column("topic-é", n).to_pylist() == ["topic-é"] * n
        assert string_column("", n).to_pylist() == [""] * n
        assert int32_column(0, n).to_pylist() == [0] * n
        assert int32_column(-3, n).to_pylist() == [-3] * n
    pool = ConstantPool()
    a, b = pool.take("t", 5), pool.take("t", 3)
    assert a.to_pylist() == ["t"] * 5 and b.to_pylist() == ["t"] * 3
    assert pool.take(5, 2).type == pa.int32() and pool.take("5", 2).type == pa.string()
    chunks = pool.chunks(9, 2 * CHUNK_ROWS + 5)
    assert [len(c) for c in chunks] == [CHUNK_ROWS, CHUNK_ROWS, 5]
    assert all(c.buffers()[1].address == chunks[0].buffers()[1].address for c in chunks)
    assert pa.chunked_array(chunks).unique().to_pylist() == [9]


def test_topic_stays_a_plain_string_column(tmp_path: Path) -> None:
    """A dictionary-encoded topic would be cheaper, but pandas and Polars would turn it into a
    categorical column; the output keeps Spark's ``topic string``."""
    import polars as pl

    write_topic_dir(tmp_path, "plain", [300, 5], batch=50)
    table = pylog.read_topic("plain", data_dir=tmp_path)
    assert table.schema.field("topic").type == pa.string()
    assert table.column("topic").to_pylist() == ["plain"] * 305
    assert table.column("partition").to_pylist() == [0] * 300 + [1] * 5
    assert pl.from_arrow(table).schema["topic"] == pl.String
    assert table.to_pandas()["topic"].dtype.kind == "O" or str(table.to_pandas()["topic"].dtype) == "str"
    assert pylog.scan_topic("plain", data_dir=tmp_path).to_duckdb("p").sql(
        "select typeof(topic), count(*) from p group by 1").fetchall() == [("VARCHAR", 305)]
