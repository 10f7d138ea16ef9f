"""read_topic / scan_topic over format 2 ("one copy") segments: the public schema (the stored
views' values copied into binary), the records the producers sent, aborted transactions and
LogAppendTime batches, a partition with format 1 segments before its format 2 ones, the remote
tier; and outputs that take views (``to_arrow(binary_view=True)``, Polars, DuckDB) agreeing."""

from __future__ import annotations

import uuid
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from pylog.protocol.records import encode_batch, encode_control_batch
from pylog.storage import LogConfig
from pylog.storage import onecopy as oc
from pylog.storage.remote_store import open_remote_store

import pylog
from pylog.model import HEADERS_TYPE, RECORD_SCHEMA
from pylog.onecopy_kafka import rows_from_kafka
from pylog.sdk.schema import output_schema
from tests.storage.storage_helpers import meta_for, open_log, records
from tests.tiered.tiered_helpers import upload

TOPIC = "events"
APPEND_TIME = 1_800_000_000_000
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def _records(first: int, n: int) -> list[dict]:
    """Keys and values short (inline in their views), long, empty and null; headers of both."""
    out = []
    for i in range(first, first + n):
        key = None if i % 7 == 3 else (b"key-%d-" % i) * (1 + i % 3)
        value = None if i % 11 == 5 else b"" if i % 11 == 6 else (b"v%d." % i) * (1 + i % 40)
        headers = [{"key": f"h{j}", "value": None if j == 1 else b"x" * (i % 20)} for j in range(i % 3)]
        out.append({"key": key, "value": value, "headers": headers, "ts": 1_700_000_000_000 + i})
    return out


def _batch(recs: list[dict], codec: str, *, producer_id: int = -1, transactional: bool = False) -> bytes:
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(len(recs)), pa.int64()), pa.array([r["ts"] for r in recs], pa.timestamp("ms")),
         pa.array([r["key"] for r in recs], pa.binary()), pa.array([r["value"] for r in recs], pa.binary()),
         pa.array([r["headers"] for r in recs], HEADERS_TYPE)], schema=RECORD_SCHEMA)
    return encode_batch(rows, base_offset=0, compression=codec, producer_id=producer_id, producer_epoch=0,
                        base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional)


def _expected(partition: int, first: int, recs: list[dict], ts: int | None = None) -> list[dict]:
    return [{"key": r["key"], "value": r["value"], "topic": TOPIC, "partition": partition,
             "offset": first + i, "timestamp": r["ts"] if ts is None else ts,
             "timestampType": 0 if ts is None else 1,
             "headers": [{"key": h["key"], "value": h["value"]} for h in r["headers"]]}
            for i, r in enumerate(recs)]


@pytest.fixture(scope="module")
def topic_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """Partition 0: format 1 segments, then format 2 ones (every codec, an aborted and a committed
    transaction, a LogAppendTime batch), sealed and active. Partition 1: format 2 only."""
    root = tmp_path_factory.mktemp("format2")
    data = root / "data"
    expected: list[dict] = []
    old = open_log(1, data / f"{TOPIC}-0", LogConfig(segment_bytes=8000))
    rb = records(30, value_size=50)
    old.append(rb, meta_for(rb), now_ms=0)
    old.close()
    expected += [{"key": k, "value": v, "topic": TOPIC, "partition": 0, "offset": o, "timestamp": 1000 + o,
                  "timestampType": 0, "headers": h} for o, (k, v, h) in
                 enumerate(zip(*(rb.column(c).to_pylist() for c in ("key", "value", "headers"))))]
    for p, config in ((0, LogConfig(segment_bytes=8000)), (1, LogConfig(segment_bytes=6000))):
        log = open_log(2, data / f"{TOPIC}-{p}", config)
        n = 0
        for k, codec in enumerate(["none", "lz4", "zstd"] * 4):
            recs = _records(n, 5 + k)
            start = log.log_end_offset
            if p == 0 and k == 4:  # an aborted transaction, then its marker
                log.append_rows(rows_from_kafka(_batch(recs, codec, producer_id=9, transactional=True),
                                                base_offset=0), now_ms=0)
                log.append_rows(rows_from_kafka(encode_control_batch(
                    base_offset=0, producer_id=9, producer_epoch=0, commit=False, coordinator_epoch=0,
                    timestamp_ms=0), base_offset=0), now_ms=0)
            elif p == 0 and k == 7:  # a committed one
                log.append_rows(rows_from_kafka(_batch(recs, codec, producer_id=9, transactional=True),
                                                base_offset=0), now_ms=0)
                log.append_rows(rows_from_kafka(encode_control_batch(
                    base_offset=0, producer_id=9, producer_epoch=0, commit=True, coordinator_epoch=0,
                    timestamp_ms=0), base_offset=0), now_ms=0)
                expected += _expected(p, start, recs)
            elif p == 1 and k == 5:  # stamped by the broker
                rows = oc.at_append_time(rows_from_kafka(_batch(recs, codec), base_offset=0), APPEND_TIME)
                log.append_rows(rows, now_ms=0)
                expected += _expected(p, start, recs, APPEND_TIME)
            else:
                log.append_rows(rows_from_kafka(_batch(recs, codec), base_offset=0), now_ms=0)
                expected += _expected(p, start, recs)
            n += len(recs)
        if p == 1:
            log.roll()
        log.seal_pending()
        assert {s.fmt for s in log._segments if s.batch_count} == ({1, 2} if p == 0 else {2})
        if p == 1:  # its sealed segments in a store too
            upload(log.dir, open_remote_store(f"file://{root}/tier"), TOPIC, uuid.UUID(int=5), 1)
        log.close()
    return data, expected


def _rows(table: pa.Table) -> list[dict]:
    out = table.to_pylist()
    for r in out:
        if "timestamp" in r:
            r["timestamp"] = round(r["timestamp"].timestamp() * 1000)
    return sorted(out, key=lambda r: (r["partition"], r["offset"]))


def test_read_topic_has_the_public_schema_and_the_records(topic_dir: tuple[Path, list[dict]]) -> None:
    data, expected = topic_dir
    table = pylog.read_topic(TOPIC, data_dir=data, include_headers=True)
    assert table.schema.equals(output_schema(COLUMNS))
    assert _rows(table) == expected
    scan = pylog.scan_topic(TOPIC, data_dir=data, include_headers=True)
    assert scan.to_arrow_batch_reader().read_all().equals(table)
    for columns in (["value"], ["headers", "offset"], ["key", "timestamp", "timestampType"]):
        picked = pylog.read_topic(TOPIC, data_dir=data, columns=columns)
        assert picked.schema.equals(output_schema(columns))
        assert picked.equals(table.select(columns))
        reader = pylog.scan_topic(TOPIC, data_dir=data, columns=columns).to_arrow_batch_reader()
        assert reader.read_all().equals(picked)


def test_view_outputs_agree(topic_dir: tuple[Path, list[dict]]) -> None:
    data, _ = topic_dir
    scan = pylog.scan_topic(TOPIC, data_dir=data, include_headers=True)
    table = scan.to_arrow()
    for s in (scan, scan.select("offset", "value")):  # format 2 alone, format 1 and 2 together
        for part in ([1], [0, 1]):
            s = s if part == [0, 1] else pylog.scan_topic(TOPIC, data_dir=data, partitions=part,
                                                          columns=s.columns)
            public = s.to_arrow()
            views = s.to_arrow(binary_view=True)
            assert {views.schema.field(c).type for c in ("value", "key", "headers") if c in s.columns} <= {
                pa.binary_view(), oc.HEADERS_V2_TYPE}
            assert views.cast(public.schema).equals(public)
            assert s.to_polars().equals(pl.from_arrow(public))
    con = scan.to_duckdb("events")
    got = con.sql('select "partition", "offset", key, value, headers from events order by 1, 2').fetchall()
    assert got == [(r["partition"], r["offset"], r["key"], r["value"], r["headers"]) for r in _rows(table)]
    decoded = pylog.scan_topic(TOPIC, data_dir=data, decode="utf8", columns=["key", "value"])
    assert decoded.to_polars().equals(pl.from_arrow(decoded.to_arrow()))


def test_remote_tier_reads_format_2(topic_dir: tuple[Path, list[dict]]) -> None:
    data, expected = topic_dir
    tier = f"file://{data.parent}/tier"
    table = pylog.read_topic(TOPIC, remote_storage=tier, partitions=[1], include_headers=True)
    rows = [r for r in expected if r["partition"] == 1][:table.num_rows]
    assert table.num_rows > 10 and _rows(table) == rows
    both = pylog.read_topic(TOPIC, data_dir=data, remote_storage=tier, partitions=[1], include_headers=True)
    assert both.equals(pylog.read_topic(TOPIC, data_dir=data, partitions=[1], include_headers=True))
    views = pylog.scan_topic(TOPIC, remote_storage=tier, partitions=[1], include_headers=True)
    assert views.to_arrow(binary_view=True).cast(table.schema).equals(table)


def test_binary_view_option(topic_dir: tuple[Path, list[dict]]) -> None:
    """``binary_view=True`` on read_topic / scan_topic: view types in every output (table, batch
    reader, Arrow stream), the same values as the default binary ones, decoders still applied."""
    data, _ = topic_dir
    public = pylog.read_topic(TOPIC, data_dir=data, include_headers=True)
    views = pylog.read_topic(TOPIC, data_dir=data, include_headers=True, binary_view=True)
    assert [views.schema.field(c).type for c in ("key", "value", "headers")] == [
        pa.binary_view(), pa.binary_view(), oc.HEADERS_V2_TYPE]
    assert views.cast(public.schema).equals(public)
    scan = pylog.scan_topic(TOPIC, data_dir=data, include_headers=True, binary_view=True)
    streamed = scan.to_arrow_batch_reader().read_all()
    assert streamed.schema.equals(views.schema) and streamed.cast(public.schema).equals(public)
    assert pa.RecordBatchReader.from_stream(scan).read_all().schema.equals(views.schema)
    assert scan.to_arrow(binary_view=False).equals(public)
    decoded = pylog.scan_topic(TOPIC, data_dir=data, columns=["key", "value"], decode="utf8",
                               binary_view=True)
    for table in (decoded.to_arrow(), decoded.to_arrow_batch_reader().read_all()):
        assert table.schema.field("value").type == pa.string()
        assert table.column("value").to_pylist() == pylog.read_topic(
            TOPIC, data_dir=data, columns=["value"], decode="utf8").column("value").to_pylist()
    with pytest.raises(ValueError, match="binary_view must be True or False"):
        pylog.read_topic(TOPIC, data_dir=data, binary_view="yes")  # type: ignore[arg-type]
