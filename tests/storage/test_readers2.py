"""Format 2 segments read by the next majors of Polars and DuckDB (Polars 2, DuckDB 2), in a
process that has nothing of pylog: only those readers (requirements/readers2.lock, installed by
`make install-readers2` into build/readers2) and pyarrow, through which DuckDB opens an Arrow IPC
file. The majors of the main lock (requirements/test.lock) read them in test_onecopy.py."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
from pylog.protocol.records import encode_batch
from pylog.storage import RECORD_SCHEMA, LogConfig
from pylog.storage.schema import BATCH_DTYPE
from storage_helpers import open_log

from pylog.onecopy_kafka import rows_from_kafka

ROOT = Path(__file__).resolve().parents[2]
READERS = ROOT / "build" / "readers2"
LOCK = ROOT / "requirements" / "readers2.lock"
SCRIPT = Path(__file__).with_name("read_without_pylog.py")
HEADERS = RECORD_SCHEMA.field("headers").type
BASE_TS = 1_700_000_000_000


def pinned() -> dict[str, str]:
    return dict(line.split("==") for line in LOCK.read_text().split() if "==" in line)


def records(n: int, seed: int) -> list[dict]:
    """Null, short (inline in their views) and long keys; null, empty and long values; headers."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else b"k%d" % i if i % 3 else b"a long key of record %d" % i
        value = None if i % 11 == 4 else b"" if i % 7 == 3 else b"value %d: " % i + rng.bytes(5) * int(
            rng.integers(1, 60))
        headers = [{"key": f"h{j}" * (1 + i % 9), "value": None if j == 1 else b"x%d" % i * j}
                   for j in range(i % 3)]
        out.append({"key": key, "value": value, "headers": headers, "ts": BASE_TS + 7 * i})
    return out


def produced(recs: list[dict], codec: str) -> bytes:
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(len(recs)), pa.int64()), pa.array([r["ts"] for r in recs], pa.timestamp("ms")),
         pa.array([r["key"] for r in recs], pa.binary()), pa.array([r["value"] for r in recs], pa.binary()),
         pa.array([r["headers"] for r in recs], HEADERS)], schema=RECORD_SCHEMA)
    return encode_batch(rows, base_offset=0, compression=codec)


def b64(v: bytes | None) -> str | None:
    return None if v is None else base64.b64encode(v).decode()


def expected_by_file(part: Path, sent: list[dict]) -> dict[str, list]:
    """Each data file's records (offsets from its base to the next file's), as the script compares."""
    files = sorted(part.glob("*.arrow*"), key=lambda p: p.stem)
    bounds = [int(f.stem) for f in files] + [len(sent)]
    return {f.name: [[o, r["ts"], b64(r["key"]), b64(r["value"]), [[h["key"], b64(h["value"])]
                                                                  for h in r["headers"]]]
                     for o, r in enumerate(sent[lo:hi], lo)]
            for f, lo, hi in zip(files, bounds, bounds[1:])}


def codecs_and_messages(part: Path, name: str) -> tuple[set[int], int, int]:
    """(producer codecs, Arrow messages, Kafka batches) of one data file, from its side files."""
    stem = part / Path(name).stem
    entries = np.fromfile(f"{stem}.batches", BATCH_DTYPE)
    return set((entries["attributes"] & 7).tolist()), Path(f"{stem}.index").stat().st_size // 32, len(entries)


def test_polars_2_and_duckdb_2_read_format_2_segments(tmp_path: Path) -> None:
    assert (READERS / "polars").is_dir() and (READERS / "duckdb").is_dir(), (
        f"{READERS} holds no Polars 2 / DuckDB 2: run `make install-readers2` (part of `make test`)")
    part = tmp_path / "events-0"
    log = open_log(2, part, LogConfig(segment_bytes=60_000))
    sent: list[dict] = []
    # runs of each codec (a sealed message keeps one compression codec), then a mixed tail
    plan = [(c, 40) for c in ("none", "lz4", "zstd", "gzip", "lz4", "none", "zstd") for _ in range(4)]
    plan += [("lz4", 30), ("zstd", 1), ("none", 12), ("snappy", 9), ("lz4", 200)]
    for i, (codec, n) in enumerate(plan[:-5]):
        recs = records(n, seed=i)
        log.append_rows(rows_from_kafka(produced(recs, codec), base_offset=0), now_ms=0)
        sent += recs
    log.roll()
    log.seal_pending()
    for i, (codec, n) in enumerate(plan[-5:]):  # the active segment: one message per batch
        recs = records(n, seed=100 + i)
        log.append_rows(rows_from_kafka(produced(recs, codec), base_offset=0), now_ms=0)
        sent += recs
    log.close()
    sealed = sorted(p.name for p in part.glob("*.arrow"))
    assert len(sealed) >= 3 and len(list(part.glob("*.arrows"))) == 1
    seen: set[int] = set()
    for name in sealed:
        codecs, messages, batches = codecs_and_messages(part, name)
        assert messages < batches, f"{name}: {batches} Kafka batches in {messages} messages, none merged"
        seen |= codecs
    assert seen == {0, 3, 4}  # gzip is stored plain (FORMAT.md), its codec bits follow
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps(expected_by_file(part, sent)))
    pyarrow_only = tmp_path / "pyarrow-only"  # pyarrow alone, not the venv with pylog and the main lock
    pyarrow_only.mkdir()
    (pyarrow_only / "pyarrow").symlink_to(Path(pa.__file__).parent)

    done = subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), str(part), str(expected), str(READERS),
                           str(pyarrow_only)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    lock = pinned()
    assert (report["polars"], report["duckdb"]) == (lock["polars"], lock["duckdb"])
    assert report["polars"].startswith("2.") and report["duckdb"].startswith("2.")
    assert sorted(report["checked"]) == sorted(p.name for p in part.glob("*.arrow*"))
    for name, readers in report["checked"].items():
        assert "duckdb" in readers and any(r.startswith("polars.") for r in readers), name
