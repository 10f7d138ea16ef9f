"""Kafka timestamps are instants: every adapter of a read gives the same UTC instant for a record, whatever
the session's or the machine's time zone (DuckDB 1.x and 2.x, Polars 1.x and 2.x, pandas 2.x; the lock
pins one major, ``make test-latest`` runs the newest)."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from sdk_helpers import T0, LogWriter

import pylog

UTC = dt.timezone.utc
# the first record's timestamp (T0 + offset 0), written by LogWriter: 2023-11-14T22:13:20Z
FIRST = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    w = LogWriter(tmp_path, "events")
    w.append(3)  # offsets 0..2, timestamps T0 + offset
    w.close()
    return tmp_path


@pytest.fixture
def far_time_zone() -> Iterator[None]:
    """The process runs in a time zone far from UTC, so a naive timestamp read as local time shows."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Pacific/Kiritimati"  # UTC+14
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_arrow_column_is_utc_instants(data_dir: Path) -> None:
    table = pylog.read_topic("events", data_dir=data_dir)
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [T0, T0 + 1, T0 + 2]
    assert table.column("timestamp")[0].as_py() == FIRST
    batches = list(pylog.scan_topic("events", data_dir=data_dir).to_batches())
    assert {b.schema.field("timestamp").type for b in batches} == {pa.timestamp("ms", tz="UTC")}
    empty = pylog.read_topic("events", data_dir=data_dir, starting_offsets={"0": 3})
    assert empty.num_rows == 0 and empty.schema == table.schema


def test_duckdb_epoch_ms_and_instant(data_dir: Path, far_time_zone: None) -> None:
    import duckdb
    con = pylog.scan_topic("events", data_dir=data_dir).to_duckdb("t")
    con.sql("set TimeZone = 'America/Los_Angeles'")
    assert con.sql('select epoch_ms("timestamp") from t order by "offset"').fetchall() == [
        (T0,), (T0 + 1,), (T0 + 2,)]
    assert con.sql('select typeof("timestamp") from t limit 1').fetchall() == [("TIMESTAMP WITH TIME ZONE",)]
    [(first,)] = con.sql('select "timestamp" from t where "offset" = 0').fetchall()
    assert first == FIRST, duckdb.__version__  # an aware datetime, whatever the session's TimeZone
    got = con.sql("""select count(*) from t where "timestamp" >= TIMESTAMPTZ '2023-11-14 22:13:20.001+00'""")
    assert got.fetchall() == [(2,)]


def test_polars_datetime_utc(data_dir: Path) -> None:
    import polars as pl
    df = pylog.scan_topic("events", data_dir=data_dir).to_polars()
    assert df.schema["timestamp"] == pl.Datetime("ms", "UTC")
    assert df["timestamp"].dt.epoch("ms").to_list() == [T0, T0 + 1, T0 + 2]
    assert df["timestamp"][0] == FIRST


def test_pandas_datetime_utc(data_dir: Path, far_time_zone: None) -> None:
    import pandas as pd
    df = pylog.scan_topic("events", data_dir=data_dir).to_pandas()
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert df["timestamp"].iloc[0] == pd.Timestamp(FIRST)
    assert [int(t.timestamp() * 1000) for t in df["timestamp"]] == [T0, T0 + 1, T0 + 2]


def test_widget_frame_timestamps_utc(data_dir: Path) -> None:
    import pandas as pd
    import pylog.widgets as pw

    df = pw.latest_records("events", n=3, data_dir=data_dir)
    assert str(df["timestamp"].dt.tz) == "UTC"
    assert sorted(df["timestamp"]) == [pd.Timestamp(FIRST) + pd.Timedelta(milliseconds=i) for i in range(3)]
