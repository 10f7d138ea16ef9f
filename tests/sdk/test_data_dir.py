"""read_topic / scan_topic over a data directory written through pylog.storage (no broker)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from sdk_helpers import T0, LogWriter, write_topic_dir

import pylog
from pylog.sdk import OffsetOutOfRangeError, UnknownTopicError
from pylog.sdk.schema import OUTPUT_FIELDS

SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    write_topic_dir(tmp_path, "events", [250, 100, 0, 7], batch=100, headers=True)
    return tmp_path


def expected_rows(counts: list[int], topic: str = "events") -> list[dict]:
    return [{"key": f"k{o}".encode(), "value": f"v{o}".encode(), "topic": topic, "partition": p, "offset": o,
             "timestampType": 0} for p, n in enumerate(counts) for o in range(n)]


def _sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def test_read_topic_schema_and_rows(data_dir: Path) -> None:
    table = pylog.read_topic("events", data_dir=data_dir)
    assert table.schema.names == SPARK_COLUMNS
    for name in SPARK_COLUMNS:
        assert table.schema.field(name).type == OUTPUT_FIELDS[name]
    got = [{k: v for k, v in r.items() if k != "timestamp"} for r in table.to_pylist()]
    assert _sorted(got) == expected_rows([250, 100, 0, 7])
    ts = pa.compute.subtract(table.column("timestamp").cast(pa.int64()), table.column("offset")).unique()
    assert ts.to_pylist() == [T0]


def test_headers_are_spark_shaped(data_dir: Path) -> None:
    table = pylog.read_topic("events", data_dir=data_dir, include_headers=True, partitions=[3])
    assert table.schema.names == [*SPARK_COLUMNS, "headers"]
    assert table.schema.field("headers").type == OUTPUT_FIELDS["headers"]
    assert table.column("headers").to_pylist() == [
        [{"key": "h", "value": f"x{o}".encode()}] if o % 2 else [] for o in range(7)]


def test_column_selection_and_offsets(data_dir: Path) -> None:
    table = pylog.read_topic("events", data_dir=data_dir, columns=["offset", "value"],
                             starting_offsets={"events": {"0": 95, "1": -2}},
                             ending_offsets='{"events": {"0": 105, "1": 3}}', partitions=[0, 1])
    assert table.schema.names == ["offset", "value"]
    assert table.column("offset").to_pylist() == [*range(95, 105), 0, 1, 2]
    plan = pylog.scan_topic("events", data_dir=data_dir, starting_offsets="latest").plan()
    assert [(r.partition, r.start, r.end) for r in plan] == [(0, 250, 250), (1, 100, 100), (2, 0, 0),
                                                             (3, 7, 7)]


def test_timestamps_select_offsets(data_dir: Path) -> None:
    scan = pylog.scan_topic("events", data_dir=data_dir, starting_timestamp=T0 + 120,
                            ending_timestamp=T0 + 200)
    assert [(r.partition, r.start, r.end) for r in scan.plan()] == [(0, 120, 200), (1, 100, 100), (2, 0, 0),
                                                                   (3, 7, 7)]
    assert scan.to_arrow().num_rows == 80


def test_transactions_and_markers_are_not_rows(tmp_path: Path) -> None:
    w = LogWriter(tmp_path, "tx", 0)
    w.append(5)                                       # 0-4
    w.append(3, producer_id=7, transactional=True)    # 5-7 aborted
    w.append(2, producer_id=8, transactional=True)    # 8-9 committed
    w.marker(7, commit=False)                         # 10
    w.append(4)                                       # 11-14
    w.marker(8, commit=True)                          # 15
    w.append(2, producer_id=9, transactional=True)    # 16-17 still open: the last stable offset is 16
    w.append(1)                                       # 18
    w.close()
    scan = pylog.scan_topic("tx", data_dir=tmp_path)
    assert [(r.start, r.end) for r in scan.plan()] == [(0, 16)]
    assert scan.to_arrow().column("offset").to_pylist() == [0, 1, 2, 3, 4, 8, 9, 11, 12, 13, 14]
    with pytest.raises(OffsetOutOfRangeError, match="out of range"):
        pylog.read_topic("tx", data_dir=tmp_path, ending_offsets={"0": 18})


def test_log_append_time_batches(tmp_path: Path) -> None:
    w = LogWriter(tmp_path, "lat", 0)
    w.append(3)
    w.append(2, attributes=0x08)  # LogAppendTime: every record takes the batch's max timestamp
    w.close()
    table = pylog.read_topic("lat", data_dir=tmp_path)
    assert table.column("timestampType").to_pylist() == [0, 0, 0, 1, 1]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [T0, T0 + 1, T0 + 2, T0 + 4, T0 + 4]


def test_adapters_agree(data_dir: Path) -> None:
    scan = pylog.scan_topic("events", data_dir=data_dir, partitions=[0, 1])
    table = scan.to_arrow()
    assert table.num_rows == 350
    reader = scan.to_arrow_batch_reader()
    assert reader.schema == table.schema
    assert reader.read_all().equals(table)
    assert pa.RecordBatchReader.from_stream(scan).read_all().equals(table)
    pdf = scan.to_pandas()
    assert list(pdf.columns) == SPARK_COLUMNS and len(pdf) == 350
    assert pdf["value"].tolist() == table.column("value").to_pylist()
    pl_df = scan.to_polars()
    assert pl_df.columns == SPARK_COLUMNS
    assert pl_df["offset"].to_list() == table.column("offset").to_pylist()
    con = scan.to_duckdb("events")
    query = 'select "partition", count(*), max("offset") from events group by 1 order by 1'
    assert con.sql(query).fetchall() == [(0, 250, 249), (1, 100, 99)]
    import duckdb
    own = duckdb.connect()
    assert scan.select("offset").to_duckdb("e2", own) is own
    assert own.sql('select sum("offset") from e2').fetchall()[0][0] == sum(range(250)) + sum(range(100))


def test_decode_json_and_utf8(tmp_path: Path) -> None:
    from pylog.storage import RECORD_SCHEMA, BatchMeta, PartitionLog

    values = [json.dumps({"id": i, "name": f"n{i}", "tags": ["a"] * (i % 3)}).encode() for i in range(50)]
    values[7] = None  # a tombstone stays null
    batch = pa.RecordBatch.from_arrays(
        [pa.array(range(50), pa.int64()), pa.array([T0] * 50, pa.timestamp("ms")),
         pa.array([f"user-{i}".encode() for i in range(50)], pa.binary()), pa.array(values, pa.binary()),
         pa.array([[]] * 50, RECORD_SCHEMA.field("headers").type)], schema=RECORD_SCHEMA)
    log = PartitionLog.open(tmp_path / "j-0", now_ms=T0)
    log.append(batch, BatchMeta(0, 49, 50, T0, T0), now_ms=T0)
    log.close()
    table = pylog.read_topic("j", data_dir=tmp_path, decode={"key": "utf8", "value": "json"})
    assert table.schema.field("key").type == pa.string()
    assert pa.types.is_struct(table.schema.field("value").type)
    got = table.column("value").to_pylist()
    assert got[7] is None
    assert got[3] == {"id": 3, "name": "n3", "tags": []}
    assert table.column("key").to_pylist()[:2] == ["user-0", "user-1"]
    reader = pylog.scan_topic("j", data_dir=tmp_path, decode="json").to_arrow_batch_reader()
    assert reader.read_all().column("value").to_pylist() == got
    polars_df = pylog.scan_topic("j", data_dir=tmp_path, decode="json").to_polars().unnest("value")
    assert polars_df["id"].to_list()[:3] == [0, 1, 2]


def test_custom_decoder_registry(data_dir: Path) -> None:
    from pylog.sdk import register_decoder

    register_decoder("upper", lambda v: pa.compute.utf8_upper(v.cast(pa.string())))
    t = pylog.read_topic("events", data_dir=data_dir, partitions=[3], decode="upper", columns=["value"])
    assert t.column("value").to_pylist() == [f"V{i}" for i in range(7)]
    t = pylog.read_topic("events", data_dir=data_dir, partitions=[3], columns=["value"],
                         decode=lambda v: pa.compute.binary_length(v))
    assert t.column("value").to_pylist() == [2] * 7


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"topic": "nope"}, UnknownTopicError, "unknown topic 'nope'"),
        ({"partitions": [9]}, UnknownTopicError, "not \\[9\\]"),
        ({"starting_offsets": {"0": 251}}, OffsetOutOfRangeError, "out of range"),
        ({"ending_offsets": {"0": -5}}, OffsetOutOfRangeError, "only -2"),
        ({"starting_offsets": {"0": 20}, "ending_offsets": {"0": 10}}, OffsetOutOfRangeError, "after ending"),
        ({"starting_offsets": "{not json"}, ValueError, "expected 'earliest', 'latest' or JSON"),
        ({"starting_offsets": {"other": {"0": 1}}}, ValueError, "names topic"),
        ({"decode": "nope"}, ValueError, "unknown decoder 'nope'"),
        ({"columns": ["nope"]}, ValueError, "unknown column"),
        ({"bootstrap_servers": "localhost:1"}, ValueError, "exactly one of data_dir"),
    ],
)
def test_misuse_has_plain_messages(data_dir: Path, kwargs: dict, error: type, message: str) -> None:
    args = {"topic": "events", "data_dir": data_dir, **kwargs}
    with pytest.raises(error, match=message):
        pylog.read_topic(args.pop("topic"), **args)


def test_neither_source() -> None:
    with pytest.raises(ValueError, match="neither was given"):
        pylog.read_topic("events")


def test_missing_data_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a directory"):
        pylog.read_topic("events", data_dir=tmp_path / "absent")


def test_reads_while_the_log_grows(tmp_path: Path) -> None:
    """A reader opened before more appends sees its own consistent view; a new read sees more."""
    w = LogWriter(tmp_path, "live", 0, segment_bytes=4096)
    for _ in range(5):
        w.append(50)
    scan = pylog.scan_topic("live", data_dir=tmp_path)
    reader = scan.to_arrow_batch_reader()
    first = reader.read_next_batch()
    for _ in range(5):
        w.append(50)
    rest = reader.read_all()
    assert first.num_rows + rest.num_rows == 250
    assert scan.to_arrow().num_rows == 500
    w.close()
