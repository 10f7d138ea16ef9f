"""Reads a format 2 partition directory with Polars and DuckDB only, as storage/FORMAT.md says a
reader without pylog does, and compares every file's records with the expected ones.

Run as ``python -I -S read_without_pylog.py <partition dir> <expected.json> <readers dir> <pyarrow dir>``:
no site-packages, so Polars and DuckDB come from `<readers dir>` (a `pip install --target`), and
pyarrow (which DuckDB needs to open an Arrow IPC file) from `<pyarrow dir>`, a directory holding it
alone. Prints one JSON line: the reader versions and what each reader checked.
"""

from __future__ import annotations

import base64
import datetime
import json
import sys
from pathlib import Path

EPOCH = datetime.datetime(1970, 1, 1)
MS = datetime.timedelta(milliseconds=1)


def b64(v: bytes | None) -> str | None:
    return None if v is None else base64.b64encode(v).decode()


def row(offset: int, ts: datetime.datetime, key: bytes | None, value: bytes | None,
        headers: list[dict] | None) -> list:
    """A record as the expected file writes it (bytes base64, timestamp in ms since the epoch)."""
    ms = (ts.replace(tzinfo=None) - EPOCH) // MS
    return [offset, ms, b64(key), b64(value), [[h["key"], b64(h["value"])] for h in headers or []]]


def polars_rows(df: object) -> list[list]:
    return [row(r["offset"], r["timestamp"], r["key"], r["value"], r["headers"])
            for r in df.to_dicts()]  # type: ignore[attr-defined]


def long_values(want: list[list]) -> list[list]:
    """(offset, value) of the records whose value is longer than 12 bytes (not inline in its view)."""
    return [[r[0], r[3]] for r in want if r[3] is not None and len(base64.b64decode(r[3])) > 12]


def main() -> None:
    part, expected_path, readers, pyarrow_dir = sys.argv[1:5]
    sys.path[:0] = [readers, pyarrow_dir]
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds
    import pyarrow.ipc

    assert Path(pl.__file__).is_relative_to(readers) and Path(duckdb.__file__).is_relative_to(readers)
    assert not any(m == "pylog" or m.startswith("pylog.") for m in sys.modules)
    expected = json.loads(Path(expected_path).read_text())
    con = duckdb.connect()
    checked: dict[str, list[str]] = {}
    for path in sorted(Path(part).glob("*.arrow*"), key=lambda p: p.stem):
        want = expected[path.name]
        done = checked.setdefault(path.name, [])
        if path.suffix == ".arrow":
            for name, df in (("polars.read_ipc", pl.read_ipc(path)),
                             ("polars.read_ipc(bytes)", pl.read_ipc(path.read_bytes())),
                             ("polars.scan_ipc", pl.scan_ipc(path).collect())):
                assert polars_rows(df) == want, (path.name, name)
                done.append(name)
            # projection and a filter Polars pushes into the scan
            scan = pl.scan_ipc(path).select("offset", "value")
            got = scan.filter(pl.col("value").bin.size() > 12).collect()
            assert [[r["offset"], b64(r["value"])] for r in got.to_dicts()] == long_values(want)
            done.append("polars.scan_ipc(select, filter)")
            dataset = ds.dataset(str(path), format="arrow")
        else:
            df = pl.read_ipc_stream(path)
            assert polars_rows(df) == want, (path.name, "polars.read_ipc_stream")
            done.append("polars.read_ipc_stream")
            dataset = pyarrow.ipc.open_stream(path.read_bytes()).read_all()
        assert (dataset.schema.metadata or {}).get(b"pylog.format") == b"2", path.name
        got = con.execute('select "offset", "timestamp", key, value, headers from dataset order by "offset"')
        assert [row(*r) for r in got.fetchall()] == want, (path.name, "duckdb")
        done.append("duckdb")
        # a filter DuckDB pushes into the scan: the rows with a long value (in a records section)
        got = con.execute('select "offset", value from dataset where octet_length(value) > 12 order by 1')
        assert [[o, b64(v)] for o, v in got.fetchall()] == long_values(want)
    print(json.dumps({"polars": pl.__version__, "duckdb": duckdb.__version__, "checked": checked}))


if __name__ == "__main__":
    main()
