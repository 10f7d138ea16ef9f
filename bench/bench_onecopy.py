"""Format 1 (Arrow IPC + `.wire`) vs format 2 (one copy: views into the producer's records), side by side.

    python bench/bench_onecopy.py [--mb 8] [--dir PATH]

For 1 KB records, codecs none / lz4 / zstd, producer batches of 1 MiB and of 16 KiB, `--mb` MB of
records per case; CPU time (process_time), best of 5 (sealing: once); one thread:

- disk/B: bytes of the sealed segment's data files per producer byte (format 1: `.arrow` + `.wire`;
  format 2: `.arrow`); the side files (`.batches`, `.index`, `.timeindex`) are the same in both.
- append us/rec: format 1 = what the broker does per produce batch (`decode_batch`: CRC, decompress,
  record walk; then `PartitionLog.append` with the batch's wire bytes: Arrow IPC encode, data and
  `.wire` writes); format 2 = `rows_from_kafka` (CRC, decompress once, walk, views) +
  `encode_message` + one `writev` to the stream file. No fsync in either.
- seal us/rec: rolled stream -> sealed IPC file (format 1: `seal_pending`, which keeps the `.wire`;
  format 2: `rows_from_message` of each appended message, merged to >= 1 MiB messages, `file_chunks`).
- fetch us/rec: the Kafka bytes of every batch of the sealed segment (format 1: `read_wire` slices
  of the mapped `.wire`; format 2: `kafka_batches` of each mapped message: header rebuilt, section sliced).
- read Mrows/s: pyarrow `open_file(memory_map).read_all()` of the sealed file, then XOR over every
  byte of the value data buffers (format 2: the variadic buffers, i.e. the whole records sections).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from pylog.protocol.records import decode_batch, encode_batch, set_base_offset
from pylog.storage import RECORD_SCHEMA, BatchMeta, LogConfig, PartitionLog
from pylog.storage import onecopy as oc
from pylog.storage.ipc import write_all

from pylog.onecopy_kafka import rows_from_kafka

RECORD = 1000
SEAL_TARGET = 1 << 20


def producer_batches(batch_bytes: int, total: int, codec: str) -> list[bytes]:
    """Batches of ~1 KB records (half random hex, half repeated words: lz4 ~2x) as a producer sends them."""
    rng = np.random.default_rng(7)
    per = max(1, batch_bytes // RECORD)
    words = b"click view order cart user session checkout payment shipped ".split()
    out = []
    for b in range(max(1, total // (per * RECORD))):
        values = []
        for _i in range(per):
            text = b" ".join(words[j] for j in rng.integers(0, len(words), 90))[:RECORD - 400]
            values.append(rng.bytes(200).hex().encode() + text.ljust(RECORD - 400, b"."))
        rows = pa.RecordBatch.from_arrays(
            [pa.array(range(per), pa.int64()), pa.array([1_700_000_000_000 + i for i in range(per)],
                                                        pa.timestamp("ms")),
             pa.array([b"key-%08d" % (b * per + i) for i in range(per)], pa.binary()),
             pa.array(values, pa.binary()), pa.array([[]] * per, RECORD_SCHEMA.field("headers").type)],
            schema=RECORD_SCHEMA)
        out.append(encode_batch(rows, base_offset=0, compression=codec, producer_id=1, producer_epoch=0,
                                base_sequence=b * per))
    return out


def best(fn: Callable[[], object], repeat: int = 5) -> float:
    """Least CPU time (all threads of the process) of `repeat` runs: on a shared machine, wall
    time mostly measures the neighbours."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def touch_v1(table: pa.Table) -> int:
    total = 0
    for col in table.column("value").chunks:
        data = col.buffers()[2]
        words = np.frombuffer(data, np.uint64, data.size // 8)
        total ^= int(np.bitwise_xor.reduce(words)) if len(words) else 0
    return total


def touch_v2(table: pa.Table) -> int:
    total = 0
    for col in table.column("value").chunks:
        for data in col.buffers()[2:]:
            words = np.frombuffer(data, np.uint64, data.size // 8)
            total ^= int(np.bitwise_xor.reduce(words)) if len(words) else 0
    return total


def read_rows(path: Path, touch: Callable[[pa.Table], int]) -> int:
    with pa.memory_map(str(path)) as source:
        table = ipc.open_file(source).read_all()
        touch(table)
        return table.num_rows


def format1(batches: list[bytes], root: Path) -> dict[str, float]:
    d = root / "v1"
    records = 0

    def append() -> None:
        nonlocal records
        shutil.rmtree(d, ignore_errors=True)
        log = PartitionLog.open(d, LogConfig(segment_bytes=1 << 30), now_ms=0)
        records = 0
        for b in batches:
            h, rows = decode_batch(b)
            meta = BatchMeta(0, h.last_offset_delta, h.record_count, h.base_timestamp, h.max_timestamp,
                             h.producer_id, h.producer_epoch, h.base_sequence, h.attributes, 0)
            log.append(rows, meta, now_ms=0, wire_size=len(b),
                       wire=lambda m, b=b: set_base_offset(b, m.base_offset, m.partition_leader_epoch))
            records += h.record_count
        log.close()

    t_append = best(append, 3)
    log = PartitionLog.open(d, LogConfig(segment_bytes=1 << 30), now_ms=0)
    log.roll()
    t = time.process_time()
    log.seal_pending()
    t_seal = time.process_time() - t
    disk = sum(p.stat().st_size for p in d.iterdir() if p.suffix in (".arrow", ".wire"))

    def fetch() -> None:
        off, end = 0, log.log_end_offset
        while off < end:
            got = log.read_wire(off, 1 << 20)
            assert all(isinstance(g, memoryview) for g in got)
            off = int.from_bytes(got[-1][:8], "big") + int.from_bytes(got[-1][23:27], "big") + 1

    t_fetch = best(fetch)
    path = next(d.glob("*.arrow"))
    t_read = best(lambda: read_rows(path, touch_v1))
    log.close()
    return {"records": records, "disk": disk, "append": t_append, "seal": t_seal, "fetch": t_fetch,
            "read": t_read}


def format2(batches: list[bytes], root: Path) -> dict[str, float]:
    d = root / "v2"
    d.mkdir(exist_ok=True)
    stream = d / "00000000000000000000.arrows"
    records = 0
    spans: list[tuple[int, int]] = []

    def append() -> None:
        nonlocal records
        records = 0
        spans.clear()
        fd = os.open(stream, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
        try:
            write_all(fd, [oc.SCHEMA_V2_MESSAGE])
            pos, base = len(oc.SCHEMA_V2_MESSAGE), 0
            for b in batches:
                m = oc.encode_message(rows_from_kafka(b, base_offset=base, partition_leader_epoch=0))
                write_all(fd, m.chunks)
                spans.append((pos, m.length))
                pos += m.length
                base += m.rows
            records = base
        finally:
            os.close(fd)

    t_append = best(append, 3)
    sealed = d / "00000000000000000000.arrow"
    file_spans: list[tuple[int, int]] = []

    def seal() -> None:
        with open(stream, "rb") as f:
            mapped = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        groups: list[list[oc.Rows]] = [[]]
        size = 0
        for pos, length in spans:
            rows = oc.rows_from_message(mapped[pos:pos + length])
            if groups[-1] and (size >= SEAL_TARGET or rows.kafka_codec not in (0, groups[-1][0].kafka_codec)):
                groups.append([])
                size = 0
            groups[-1].append(rows)
            size += length
        messages = [oc.encode_message(oc.concat_rows(g)) for g in groups]
        fd = os.open(sealed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            # one contiguous write: sections gathered from the mapped stream in many iovecs left
            # the new file 2-3x slower to fault in on a reader's first touch (measured here)
            write_all(fd, [b"".join(oc.file_chunks(messages))])
        finally:
            os.close(fd)
        file_spans.clear()
        pos = 8 + len(oc.SCHEMA_V2_MESSAGE)
        for m in messages:
            file_spans.append((pos, m.length))
            pos += m.length

    t_seal = best(seal, 1)
    disk = sealed.stat().st_size
    with open(sealed, "rb") as f:
        mapped = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))

    def fetch() -> None:
        for pos, length in file_spans:
            oc.kafka_batches(mapped[pos:pos + length])

    t_fetch = best(fetch)
    t_read = best(lambda: read_rows(sealed, touch_v2))
    return {"records": records, "disk": disk, "append": t_append, "seal": t_seal, "fetch": t_fetch,
            "read": t_read}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-onecopy-", dir=args.dir))
    head = (f"{'codec':6} {'batch':>6} | {'disk/B v1':>9} {'v2':>5} | {'append us/rec v1':>16} {'v2':>5} | "
            f"{'seal us/rec v1':>14} {'v2':>5} | {'fetch us/rec v1':>15} {'v2':>5} | "
            f"{'read Mrows/s v1':>15} {'v2':>5}")
    print(head)
    print("-" * len(head))
    try:
        for batch_bytes, label in ((1 << 20, "1 MiB"), (16 << 10, "16 KiB")):
            for codec in ("none", "lz4", "zstd"):
                batches = producer_batches(batch_bytes, args.mb << 20, codec)
                produced = sum(len(b) for b in batches)
                one, two = format1(batches, root), format2(batches, root)
                n = one["records"]
                assert n == two["records"]

                def us(r: dict[str, float], k: str, n: float = n) -> str:
                    return f"{r[k] / n * 1e6:.2f}"

                print(f"{codec:6} {label:>6} | {one['disk'] / produced:9.2f} {two['disk'] / produced:5.2f} | "
                      f"{us(one, 'append'):>16} {us(two, 'append'):>5} | {us(one, 'seal'):>14} "
                      f"{us(two, 'seal'):>5} | {us(one, 'fetch'):>15} {us(two, 'fetch'):>5} | "
                      f"{n / one['read'] / 1e6:15.2f} {n / two['read'] / 1e6:5.2f}", flush=True)
                shutil.rmtree(root / "v1", ignore_errors=True)
                shutil.rmtree(root / "v2", ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
