"""Spark's batch read of a topic against a plain pyarrow read of the same Arrow objects, without a
broker: a partition log is written straight to a data directory, its sealed segments are copied
to the store under the remote layout (moto's S3 server, or ``file://``), and then

- **Spark (store only)**: ``format("pylog")`` with ``remoteStorage`` alone (one input partition
  per remote segment), ``count(*)`` and ``sum(length(value))``;
- **Spark (data directory)**: the same over the local data directory (``dataDir``);
- **pyarrow (same objects)**: each remote segment's ``.arrow`` object read whole with
  ``pyarrow.ipc.open_file`` and the same two aggregates.

Each timed read runs twice in one Spark session (the first one also starts the Python workers);
the best is shown. Run: ``python bench/bench_spark_read.py [--records 1200000] [--value-size 200]
[--segment-bytes 33554432] [--store s3|file] [--segment-format 1|2] [--codec none|lz4|zstd]``.
``--segment-format 2`` writes the log as a broker does by default (one copy: the producer's
batches, compressed with ``--codec``, appended as they came) instead of format 1's Arrow columns.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

TOPIC = "history"
TOPIC_ID = uuid.UUID(int=0xBE7C)
AGGREGATES = ("count(*) as n", "sum(length(value)) as b")


def write_log(data: Path, records: int, value_size: int, segment_bytes: int, per_batch: int,
              incompressible: bool = False, segment_format: int = 1, codec: str = "lz4") -> None:
    """One partition of ``records`` records in producer-sized batches, rolled and sealed; values
    repeat one byte (the segments' lz4 bodies shrink them) unless ``incompressible``. Format 2:
    each batch encoded as a producer sends it (``codec``) and appended as a broker does."""
    from pylog.protocol.records import encode_batch
    from pylog.storage import RECORD_SCHEMA, BatchMeta, LogConfig, PartitionLog

    from pylog.onecopy_kafka import rows_from_kafka

    ts0 = 1_700_000_000_000
    config = LogConfig(segment_bytes=segment_bytes, segment_format=segment_format)
    log = PartitionLog.open(data / f"{TOPIC}-0", config, now_ms=ts0)
    body = np.frombuffer(b"x" * value_size, np.uint8)
    rng = np.random.default_rng(7)
    headers = RECORD_SCHEMA.field("headers").type
    for first in range(0, records, per_batch):
        n = min(per_batch, records - first)
        values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(n + 1, dtype=np.int32) * value_size),
            pa.py_buffer(rng.integers(0, 256, n * value_size, dtype=np.uint8) if incompressible
                         else np.tile(body, n))])
        ts = ts0 + first
        rb = pa.RecordBatch.from_arrays(
            [pa.array(np.arange(n, dtype=np.int64)), pa.array(np.arange(ts, ts + n), pa.timestamp("ms")),
             pa.nulls(n, pa.binary()), values, pa.nulls(n, headers)], schema=RECORD_SCHEMA)
        if segment_format == 2:
            batch = encode_batch(rb, base_offset=0, compression=codec, producer_id=-1, producer_epoch=-1,
                                 base_sequence=-1)
            log.append_rows(rows_from_kafka(batch, base_offset=0, partition_leader_epoch=0), now_ms=ts)
            continue
        log.append(rb, BatchMeta(0, n - 1, n, ts, ts + n - 1, partition_leader_epoch=0), now_ms=ts)
    log.roll()
    log.seal_pending()
    log.flush()
    log.close()


def upload(part_dir: Path, store: object) -> object:
    """Every sealed segment of the partition directory into the store, then manifest version 1."""
    from pylog.storage.remote_layout import (
        RemoteLogSegment,
        RemoteManifest,
        manifest_key,
        new_segment_id,
        partition_prefix,
        segment_key,
    )
    from pylog.storage.schema import BATCH_DTYPE, TIME_DTYPE

    prefix = partition_prefix(TOPIC, TOPIC_ID, 0)
    segs = []
    for arrow in sorted(part_dir.glob("*.arrow")):
        stem = arrow.with_suffix("")
        base = int(arrow.name[:20])
        b = np.fromfile(f"{stem}.batches", BATCH_DTYPE)
        t = np.fromfile(f"{stem}.timeindex", TIME_DTYPE)
        end = int(b["base_offset"][-1]) + int(b["last_offset_delta"][-1])
        exts = (".arrow", ".index", ".timeindex", ".batches")
        size = sum(os.path.getsize(f"{stem}{ext}") for ext in exts)
        seg = RemoteLogSegment(new_segment_id(), base, end, int(t["timestamp"][-1]), size, 0, ((0, base),))
        for ext in exts:
            store.put_file(segment_key(prefix, seg, ext), f"{stem}{ext}")  # type: ignore[attr-defined]
        segs.append(seg)
    manifest = RemoteManifest(TOPIC, TOPIC_ID, 0, 1, segs[0].base_offset, tuple(segs))
    store.put_bytes(manifest_key(prefix, 1), manifest.encode())  # type: ignore[attr-defined]
    return manifest


def pyarrow_read(store: object, manifest: object) -> tuple[float, tuple[int, int]]:
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc
    from pylog.storage.remote_layout import segment_key

    best = float("inf")
    n = b = 0
    for _ in range(2):
        t0 = time.perf_counter()
        n = b = 0
        for seg in manifest.segments:  # type: ignore[attr-defined]
            with store.open(segment_key(manifest.prefix, seg, ".arrow")) as f:  # type: ignore[attr-defined]
                table = ipc.open_file(f).read_all()
            n += table.num_rows
            b += _value_bytes(table.column("value")) if table.schema.metadata else \
                pc.sum(pc.binary_length(table.column("value"))).as_py() or 0
        best = min(best, time.perf_counter() - t0)
    return best, (n, b)


def _value_bytes(column: pa.ChunkedArray) -> int:
    """Sum of a binary_view column's value lengths, from its views (pyarrow has no binary_length
    kernel for views): each view's first int32, null slots left out."""
    import pyarrow.compute as pc

    total = 0
    for chunk in column.chunks:
        lengths = np.frombuffer(chunk.buffers()[1], np.int32).reshape(-1, 4)[chunk.offset:][:len(chunk), 0]
        total += int(lengths[pc.is_valid(chunk).to_numpy(zero_copy_only=False)].sum())
    return total


Result = tuple[float, tuple[int, int]]


def spark_reads(readers: dict[str, dict[str, str]], conf: dict[str, str]) -> dict[str, Result]:
    from pyspark.sql import SparkSession

    import pylog.spark

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pylog.spark.register(spark)
    out = {}
    try:
        for name, options in readers.items():
            best = float("inf")
            row = None
            for _ in range(2):
                t0 = time.perf_counter()
                df = spark.read.format("pylog").options(**options).load()
                row = df.selectExpr(*AGGREGATES).collect()[0]
                best = min(best, time.perf_counter() - t0)
            assert row is not None
            out[name] = (best, (int(row.n), int(row.b)))
    finally:
        spark.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_200_000)
    ap.add_argument("--value-size", type=int, default=200)
    ap.add_argument("--segment-bytes", type=int, default=32 << 20)
    ap.add_argument("--per-batch", type=int, default=1000, help="records per producer batch")
    ap.add_argument("--store", choices=("file", "s3"), default="s3")
    ap.add_argument("--incompressible", action="store_true",
                    help="random values (the store then carries every byte), not one repeated byte")
    ap.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value")
    ap.add_argument("--segment-format", type=int, choices=(1, 2), default=1)
    ap.add_argument("--codec", choices=("none", "lz4", "zstd"), default="lz4",
                    help="the producer's compression (format 2)")
    args = ap.parse_args()
    from pylog.storage.remote_store import open_remote_store

    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    server = None
    options: dict[str, str] = {}
    if args.store == "s3":
        from pylog.testing_s3 import S3TestServer

        server = S3TestServer().start()
        uri, options = server.uri("bench"), dict(server.options)
        os.environ.update(server.env)
    else:
        uri = f"file://{tmp / 'remote'}"
    try:
        write_log(tmp / "data", args.records, args.value_size, args.segment_bytes, args.per_batch,
                  args.incompressible, args.segment_format, args.codec)
        store = open_remote_store(uri, options)
        manifest = upload(tmp / "data" / f"{TOPIC}-0", store)
        pdt, pres = pyarrow_read(store, manifest)
        common = {"subscribe": TOPIC}
        store_only = {**common, "remoteStorage": uri, "storageOptions": json.dumps(options)}
        readers = {"Spark (store only)": store_only,
                   "Spark (data directory)": {**common, "dataDir": str(tmp / "data")}}
        conf = dict(c.split("=", 1) for c in args.conf)
        got = spark_reads(readers, conf)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    segments = len(manifest.segments)  # type: ignore[attr-defined]
    fmt = f"format {args.segment_format}" + (f" ({args.codec})" if args.segment_format == 2 else "")
    print(f"store: {args.store}, {args.records} records of {args.value_size} B, {segments} remote segments, "
          f"{fmt}" + (f", conf {conf}" if conf else ""))
    print(f"{'row':<26}{'records':>10}{'seconds':>10}{'records/s':>12}{'MB/s':>8}{'vs pyarrow':>12}")
    for name, (dt, (n, b)) in [*got.items(), ("pyarrow (same objects)", (pdt, pres))]:
        assert (n, b) == pres, f"{name} read {(n, b)}, pyarrow {pres}"
        print(f"{name:<26}{n:>10}{dt:>10.2f}{n / dt:>12,.0f}{b / dt / 1e6:>8.1f}{pdt / dt:>11.2f}x")


if __name__ == "__main__":
    main()
