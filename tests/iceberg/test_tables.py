"""`TopicTables` on a real pyiceberg SqlCatalog (SQLite, local warehouse): offsets travel in snapshot
summaries, a concurrent writer makes a commit fail instead of repeating records, layouts and schema
evolution, upsert, and what pyiceberg, DuckDB and Polars read back."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

from pylog.iceberg import layout as L
from pylog.iceberg import open_catalog
from pylog.iceberg.tables import CommitConflict, TopicTables, snapshot_offsets

T0 = 1_700_000_000_000


def records(partition: int, offsets: range, *, values: list[bytes | None] | None = None,
            keys: list[bytes | None] | None = None, ts: int = T0) -> pa.Table:
    n = len(offsets)
    return pa.table({
        "offset": pa.array(list(offsets), pa.int64()),
        "timestamp": pa.array([ts + o * 1000 for o in offsets], pa.int64()).cast(pa.timestamp("ms")),
        "key": pa.array(keys if keys is not None else [f"k{o}".encode() for o in offsets], pa.binary()),
        "value": pa.array(values if values is not None else [f"v{o}".encode() for o in offsets], pa.binary()),
        "headers": pa.array([[{"key": "h", "value": b"x"}]] * n, L.HEADERS),
        "partition": pa.array([partition] * n, pa.int32()),
    })


@pytest.fixture
def catalog(tmp_path: Path):  # type: ignore[no-untyped-def]
    return open_catalog(tmp_path)


def tables(catalog, **kw) -> TopicTables:  # type: ignore[no-untyped-def]
    t = TopicTables(catalog, "pylog.orders", "orders", "id-1", **kw)
    t.load()
    return t


def test_offsets_travel_in_the_snapshot_and_survive_a_reload(catalog) -> None:  # type: ignore[no-untyped-def]
    t = tables(catalog)
    assert t.load() == ({}, {})
    rows = L.kafka_rows(records(0, range(0, 5)), "orders")
    t.ensure_table(L.KAFKA, rows.schema)
    t.commit(rows, None, {0: 5, 1: 0})
    t.commit(L.kafka_rows(records(1, range(0, 3)), "orders"), None, {0: 5, 1: 3})
    again = tables(catalog)
    assert again.load() == ({0: 5, 1: 3}, {})
    assert again.layout == L.KAFKA
    table = catalog.load_table("pylog.orders")
    assert table.properties["commit.retry.num-retries"] == "0"
    assert [f.name for f in table.spec().fields] == ["timestamp_day"]
    props = table.current_snapshot().summary.additional_properties
    assert json.loads(props["pylog.offsets"]) == {"0": 5, "1": 3} and props["pylog.topic.id"] == "id-1"
    got = table.scan().to_arrow()
    assert got.schema.names == list(L.KAFKA_SCHEMA.names)
    assert sorted(zip(got["partition"].to_pylist(), got["offset"].to_pylist())) == \
        [(0, o) for o in range(5)] + [(1, o) for o in range(3)]
    assert got["timestamp"].type == pa.timestamp("us", tz="UTC")
    assert got["timestamp"][0].as_py() == dt.datetime.fromtimestamp(T0 / 1000, dt.timezone.utc)
    # what pyiceberg plans, DuckDB and Polars read
    scan = table.scan(row_filter="partition = 0")
    assert scan.to_duckdb("t").sql("select count(*), max(\"offset\") from t").fetchall() == [(5, 4)]
    assert scan.to_polars().height == 5


def test_a_concurrent_commit_fails_instead_of_repeating_records(catalog) -> None:  # type: ignore[no-untyped-def]
    a, b = tables(catalog), tables(catalog)
    rows = L.kafka_rows(records(0, range(0, 5)), "orders")
    a.ensure_table(L.KAFKA, rows.schema)
    a.commit(rows, None, {0: 5})
    b.load()
    a.commit(L.kafka_rows(records(0, range(5, 9)), "orders"), None, {0: 9})
    with pytest.raises(CommitConflict):
        b.commit(L.kafka_rows(records(0, range(5, 9)), "orders"), None, {0: 9})
    assert b.load() == ({0: 9}, {})  # b reloaded: it now knows where the table is
    assert catalog.load_table("pylog.orders").scan().to_arrow().num_rows == 9


def test_a_retry_setting_changed_by_hand_is_put_back(catalog) -> None:  # type: ignore[no-untyped-def]
    t = tables(catalog)
    rows = L.kafka_rows(records(0, range(0, 2)), "orders")
    t.ensure_table(L.KAFKA, rows.schema)
    with catalog.load_table("pylog.orders").transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": "4"})
    tables(catalog)
    assert catalog.load_table("pylog.orders").properties["commit.retry.num-retries"] == "0"


def test_a_recreated_topic_is_read_from_its_start(catalog) -> None:  # type: ignore[no-untyped-def]
    t = tables(catalog)
    rows = L.kafka_rows(records(0, range(0, 5)), "orders")
    t.ensure_table(L.KAFKA, rows.schema)
    t.commit(rows, None, {0: 5})
    newer = TopicTables(catalog, "pylog.orders", "orders", "id-2")
    assert newer.load() == ({}, {})
    assert snapshot_offsets(catalog.load_table("pylog.orders"), "id-1") == {0: 5}


def test_registry_layout_evolves_and_dead_letters(catalog) -> None:  # type: ignore[no-untyped-def]
    t = tables(catalog, layout=L.REGISTRY)
    v1 = pa.array([{"id": 1, "amount": 9.5}, {"id": 2, "amount": 1.0}],
                  pa.struct([("id", pa.int64()), ("amount", pa.float64())]))
    rows = L.registry_rows(records(0, range(0, 2)), v1, "orders")
    assert rows.column_names == ["id", "amount", *(L.PREFIX + m for m in L.METADATA)]
    t.ensure_table(L.REGISTRY, rows.schema)
    t.commit(rows, None, {0: 2})
    v2 = pa.array([{"id": 3, "amount": 2.0, "note": "new"}],
                  pa.struct([("id", pa.int64()), ("amount", pa.float64()), ("note", pa.string())]))
    dead = L.dlq_rows(records(0, range(3, 4), values=[b"garbage"]), "orders", ["not in the wire format"])
    t.commit(L.registry_rows(records(0, range(2, 3)), v2, "orders"), dead, {0: 4})
    table = catalog.load_table("pylog.orders")
    assert table.schema().find_field("note").optional
    got = table.scan().to_arrow().sort_by("kafka_offset")
    assert got["note"].to_pylist() == [None, None, "new"]
    assert got["kafka_partition"].to_pylist() == [0, 0, 0]
    assert [f.name for f in table.spec().fields] == ["kafka_timestamp_day"]
    dlq = catalog.load_table("pylog.orders~dlq").scan().to_arrow()
    assert dlq["offset"].to_pylist() == [3] and dlq["error"].to_pylist() == ["not in the wire format"]
    assert dlq["value"].to_pylist() == [b"garbage"]
    assert tables(catalog).load() == ({0: 4}, {0: 4})


def test_value_fields_clashing_with_kafka_columns_are_refused() -> None:
    clash = pa.array([{"kafka_offset": 1}], pa.struct([("kafka_offset", pa.int64())]))
    with pytest.raises(L.LayoutError, match="kafka_offset"):
        L.registry_rows(records(0, range(0, 1)), clash, "orders")


def test_upsert_keeps_the_latest_value_per_key(catalog) -> None:  # type: ignore[no-untyped-def]
    t = tables(catalog, upsert=True)
    first = L.kafka_rows(records(0, range(0, 3), keys=[b"a", b"b", b"c"]), "orders")
    t.ensure_table(L.KAFKA, first.schema)
    t.commit(first, None, {0: 3}, upsert_keys=pa.array([b"a", b"b", b"c"]))
    second = L.kafka_rows(records(0, range(3, 4), keys=[b"a"], values=[b"a2"]), "orders")
    t.commit(second, None, {0: 5}, upsert_keys=pa.array([b"a", b"b"]))  # b: a tombstone at offset 4
    got = catalog.load_table("pylog.orders").scan().to_arrow().sort_by("key")
    assert list(zip(got["key"].to_pylist(), got["value"].to_pylist())) == [(b"a", b"a2"), (b"c", b"v2")]
    assert tables(catalog).load() == ({0: 5}, {})


def test_conform_makes_arrow_types_iceberg_can_store() -> None:
    t = pa.table({"d": pa.array(["x", "y"]).dictionary_encode(), "u": pa.array([1, 2], pa.uint32()),
                  "t": pa.array([1, 2], pa.timestamp("ms", tz="UTC")),
                  "s": pa.array(["a", "b"], pa.large_string())})
    out = L.conform(t)
    assert out.schema.types == [pa.string(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.string()]
    assert out["t"].cast(pa.int64()).to_pylist() == [1000, 2000]
