"""PartitionLog in format 1 (Arrow columns + `.wire`) against format 2 (one copy), side by side.

    python bench/bench_log_format.py [--mb 16] [--record-mb 4] [--broker-mb 32] [--dir PATH]

1 KB records compressed with lz4 (about 2:1), producer batches of 1 MiB and of 16 KiB, `--mb` MB of
records per case, one thread, no fsync; CPU time (process_time), best of 3:

- disk/B: bytes of the partition's data files (`.arrow`/`.arrows`, and `.wire` in format 1) per
  byte the producer sent, once appended (active) and once sealed; side files (`.index`,
  `.timeindex`, `.batches`: 112 bytes per batch in both formats) are not counted.
- append ms/MB: what the broker does for each produce batch, per MB the producer sent. Format 1:
  `decode_batch` (CRC, decompress, record walk into Arrow), then `PartitionLog.append` with the
  batch's bytes (Arrow IPC encode, lz4 again for bodies >= 16 KiB, data and `.wire` writes).
  Format 2: `rows_from_kafka` (CRC, decompress once, record walk into views), then
  `PartitionLog.append_rows` (one message: the producer's lz4 section as it came).
- seal ms/MB: the rolled segment rewritten as a sealed IPC file (`seal_pending`).
- fetch ms/MB: `read_wire` of the whole sealed partition (format 1: `.wire` slices; format 2:
  the header rebuilt from `.batches` and the section joined to it).

A second table gives the append per record for lz4 batches of 50 and of 1000 records
(`--record-mb` MB of records each), where the fixed cost of each batch shows.

A third table runs a broker per format (`pylog.segment.format` 1 and 2, `pylog.LocalBroker`,
the remote tier on to a file:// store, `pylog.wire.cache.bytes=0` so fetches read the segment
files), produces `--broker-mb` MB of the same records in 64 KiB batches over Kafka (pylog's client,
acks=all) for each of none, lz4 and zstd, waits until every rolled segment is sealed and
uploaded, then (wall time; reads best of 3, the consumer once):

- local disk/B: every file of the partition directory (data, side files, `.wire`) per byte sent;
- remote disk/B: every object of the partition's uploaded segments per byte sent in them (the
  `size`s of their `.batches`);
- read_topic Mrows/s: `pylog.read_topic(data_dir=...)` (key and value binary: format 2 copies
  the values out of their views); `views`: `scan_topic(...).to_arrow(binary_view=True)` (format 2
  values not copied); against `raw pyarrow`: each data file opened (memory map) and `read_all()`
  (format 2: view columns, not cast);
- catch-up from disk over Kafka: consume Mrows/s, a confluent-kafka consumer from offset 0 to
  the end, timed from its first record (bound by the client's per-record cost); fetch MB/s (bytes
  sent per second), `bench_clients.raw_fetch`'s plain Fetch v11 client (1 MiB per partition, one
  request in flight, batch headers walked only), which times the broker and the socket.
`--broker-mb 0` skips it, `--mb 0` the first two tables.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from bench_onecopy import RECORD, producer_batches
from pylog.protocol.records import decode_batch, set_base_offset
from pylog.storage import BatchMeta, LogConfig, PartitionLog
from pylog.storage.schema import BATCH_DTYPE

import pylog
from pylog.onecopy_kafka import rows_from_kafka

REPEAT = 3


def _best(fn: Callable[[], object], repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def _disk(d: Path) -> int:
    return sum(p.stat().st_size for p in d.iterdir() if p.suffix in (".arrow", ".arrows", ".wire"))


def run(fmt: int, batches: list[bytes], d: Path) -> dict[str, float]:
    cfg = LogConfig(segment_bytes=1 << 30, segment_format=fmt)

    def append() -> None:
        shutil.rmtree(d, ignore_errors=True)
        log = PartitionLog.open(d, cfg, now_ms=0)
        for b in batches:
            if fmt == 1:
                h, rows = decode_batch(b)
                meta = BatchMeta(0, h.last_offset_delta, h.record_count, h.base_timestamp, h.max_timestamp,
                                 h.producer_id, h.producer_epoch, h.base_sequence, h.attributes, 0)
                log.append(rows, meta, now_ms=0, wire_size=len(b),
                           wire=lambda m, b=b: set_base_offset(b, m.base_offset, m.partition_leader_epoch))
            else:
                log.append_rows(rows_from_kafka(b, base_offset=0, partition_leader_epoch=0), now_ms=0)
        log.close()

    t_append = _best(append)
    active = _disk(d)
    log = PartitionLog.open(d, cfg, now_ms=0)
    log.roll()
    t = time.process_time()
    log.seal_pending()
    t_seal = time.process_time() - t
    sealed = _disk(d)

    def fetch() -> None:
        off, end = 0, log.log_end_offset
        while off < end:
            got = log.read_wire(off, 1 << 20)
            last = got[-1]
            assert isinstance(last, memoryview)
            off = int.from_bytes(last[:8], "big") + int.from_bytes(last[23:27], "big") + 1

    t_fetch = _best(fetch)
    log.close()
    return {"append": t_append, "seal": t_seal, "fetch": t_fetch, "active": active, "sealed": sealed}


def _wall_best(fn: Callable[[], object], repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _produce(bootstrap: str, topic: str, batches: list[bytes]) -> None:
    """Each batch in its own Produce request (acks=all), pipelined 8 deep."""
    import asyncio

    from pylog.protocol.api import ApiKey

    from pylog.client import BlockingClient

    with BlockingClient(bootstrap) as client:
        async def send(b: bytes) -> None:
            body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": b}]}]}
            resp = await client.aio.request(ApiKey.PRODUCE, body, wanted=(3, 12))
            code = resp.responses[0].partition_responses[0].error_code
            assert code == 0, f"produce failed: error {code}"

        async def all_batches() -> None:
            await client.aio.start()
            for i in range(0, len(batches), 8):
                await asyncio.gather(*(send(b) for b in batches[i:i + 8]))

        client.run(all_batches())


def _remote(root: Path) -> tuple[int, int, int]:
    """(object bytes, bytes sent in them, segments) of the uploaded segments under a file:// store."""
    objects = [p for p in root.rglob("*") if p.is_file() and p.parent.name == "segments"]
    sent = sum(int(np.fromfile(p, BATCH_DTYPE)["size"].sum()) for p in objects if p.suffix == ".batches")
    return sum(p.stat().st_size for p in objects), sent, sum(p.suffix == ".arrow" for p in objects)


def _raw_pyarrow(part: Path) -> int:
    rows = 0
    for path in sorted(part.glob("*.arrow*")):
        with pa.memory_map(str(path)) as source:
            reader = ipc.open_file(source) if path.suffix == ".arrow" else ipc.open_stream(source)
            rows += reader.read_all().num_rows
    return rows


def _consume(bootstrap: str, topic: str, count: int) -> float:
    """Seconds a consumer takes to read `count` records from offset 0, from its first record on
    (its start, connection and metadata not counted)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 5})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while not got:
        got = sum(m.error() is None for m in c.consume(1, timeout=1.0))
    t0 = time.perf_counter()
    while got < count:  # consume() waits for its count or the timeout: never more than is left
        got += sum(m.error() is None for m in c.consume(min(10000, count - got), timeout=1.0))
    dt = time.perf_counter() - t0
    c.close()
    return dt


def broker_run(fmt: int, batches: list[bytes], root: Path, segment_bytes: int) -> dict[str, float]:
    from bench_clients import raw_fetch
    from confluent_kafka.admin import AdminClient, NewTopic

    remote = root / f"remote-{fmt}"
    config = {"pylog.segment.format": str(fmt), "remote.log.storage.system.enable": "true",
              "remote.log.storage.uri": f"file://{remote}", "remote.log.manager.task.interval.ms": "200",
              "pylog.wire.cache.bytes": "0", "log.segment.bytes": str(segment_bytes)}
    sent = sum(len(b) for b in batches)
    records = sum(decode_batch(b).header.record_count for b in batches[:1]) * len(batches)
    with pylog.LocalBroker(root / f"data-{fmt}", config=config) as broker:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        # the records' timestamps are from 2023: retention.ms=-1 keeps them (locally too)
        topic = NewTopic("t", 1, 1, config={"remote.storage.enable": "true", "retention.ms": "-1"})
        admin.create_topics([topic])["t"].result(30)
        _produce(bs, "t", batches)
        part = broker.data_dir / "t-0"
        deadline = time.monotonic() + 120
        while True:
            sealed = len(list(part.glob("*.arrow")))
            if sealed and len(list(part.glob("*.arrows"))) == 1 and _remote(remote)[2] == sealed:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"format {fmt}: {_remote(remote)[2]} of {sealed} sealed segments uploaded")
            time.sleep(0.2)
        local = sum(p.stat().st_size for p in part.iterdir() if p.is_file())
        remote_bytes, remote_sent, segments = _remote(remote)
        n = 0

        def read() -> None:
            nonlocal n
            n = pylog.read_topic("t", data_dir=broker.data_dir).num_rows

        t_read = _wall_best(read)
        assert n == records, (n, records)
        scan = pylog.scan_topic("t", data_dir=broker.data_dir)
        t_views = _wall_best(lambda: scan.to_arrow(binary_view=True))
        t_raw = _wall_best(lambda: _raw_pyarrow(part))
        assert _raw_pyarrow(part) == records
        t_consume = _consume(bs, "t", records)
        t_fetch = _wall_best(lambda: raw_fetch(bs, "t", records))
    return {"local": local / sent, "remote": remote_bytes / remote_sent, "segments": segments,
            "read": records / t_read / 1e6, "views": records / t_views / 1e6, "raw": records / t_raw / 1e6,
            "consume": records / t_consume / 1e6, "fetch_mb": sent / t_fetch / 1e6}


def broker_table(mb: int, root: Path) -> None:
    head = (f"{'codec':5} | {'local disk/B v1':>15} {'v2':>5} | {'remote disk/B v1':>16} {'v2':>5} | "
            f"{'read_topic Mrows/s v1':>21} {'v2':>5} | {'views v1':>8} {'v2':>5} | "
            f"{'raw pyarrow v1':>14} {'v2':>5} | "
            f"{'consume Mrows/s v1':>18} {'v2':>5} | {'fetch MB/s v1':>13} {'v2':>5}")
    print(f"\nbroker, {mb} MB of 1 KB records in 64 KiB batches, 4 MiB segments, file:// remote tier")
    print(head)
    print("-" * len(head))
    for codec in ("none", "lz4", "zstd"):
        batches = producer_batches(64 << 10, mb << 20, codec)
        one, two = (broker_run(fmt, batches, root / codec, 4 << 20) for fmt in (1, 2))
        print(f"{codec:5} | {one['local']:15.2f} {two['local']:5.2f} | {one['remote']:16.2f} "
              f"{two['remote']:5.2f} | {one['read']:21.2f} {two['read']:5.2f} | {one['views']:8.2f} "
              f"{two['views']:5.2f} | {one['raw']:14.2f} "
              f"{two['raw']:5.2f} | {one['consume']:18.3f} {two['consume']:5.3f} | "
              f"{one['fetch_mb']:13.0f} {two['fetch_mb']:5.0f}", flush=True)
        shutil.rmtree(root / codec, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--record-mb", type=int, default=4)
    ap.add_argument("--broker-mb", type=int, default=32)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-log-format-", dir=args.dir))
    head = (f"{'lz4 batch':9} | {'disk/B active v1':>16} {'v2':>5} | {'sealed v1':>9} {'v2':>5} | "
            f"{'append ms/MB v1':>15} {'v2':>6} | {'seal ms/MB v1':>13} {'v2':>6} | "
            f"{'fetch ms/MB v1':>14} {'v2':>6}")
    print(head)
    print("-" * len(head))
    try:
        for batch_bytes, label in ((1 << 20, "1 MiB"), (16 << 10, "16 KiB")) if args.mb else ():
            batches = producer_batches(batch_bytes, args.mb << 20, "lz4")
            sent = sum(len(b) for b in batches)
            mb = sent / 1e6
            one, two = run(1, batches, root / "t-1"), run(2, batches, root / "t-2")

            def ms(r: dict[str, float], k: str, mb: float = mb) -> float:
                return r[k] / mb * 1e3

            print(f"{label:9} | {one['active'] / sent:16.2f} {two['active'] / sent:5.2f} | "
                  f"{one['sealed'] / sent:9.2f} {two['sealed'] / sent:5.2f} | "
                  f"{ms(one, 'append'):15.2f} {ms(two, 'append'):6.2f} | {ms(one, 'seal'):13.2f} "
                  f"{ms(two, 'seal'):6.2f} | {ms(one, 'fetch'):14.2f} {ms(two, 'fetch'):6.2f}", flush=True)
            shutil.rmtree(root / "t-1", ignore_errors=True)
            shutil.rmtree(root / "t-2", ignore_errors=True)
        print(f"\n{'lz4 batch':12} | {'append us/record v1':>19} {'v2':>6}")
        for per in (50, 1000) if args.mb else ():
            batches = producer_batches(per * RECORD, args.record_mb << 20, "lz4")
            n = per * len(batches)
            one, two = run(1, batches, root / "r-1"), run(2, batches, root / "r-2")
            us = {k: r["append"] / n * 1e6 for k, r in (("v1", one), ("v2", two))}
            print(f"{per:5} records | {us['v1']:19.2f} {us['v2']:6.2f}", flush=True)
            shutil.rmtree(root / "r-1", ignore_errors=True)
            shutil.rmtree(root / "r-2", ignore_errors=True)
        if args.broker_mb:
            broker_table(args.broker_mb, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
