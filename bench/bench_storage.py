"""Partition log throughput, side by side with raw pyarrow IPC on the same data in the same run.

    python bench/bench_storage.py [--records-100b N] [--records-1kb N] [--dir PATH]

Rows: append (PartitionLog.append of 16k-record batches, bytes handed to the kernel, no fsync) vs
writing the same batches with pyarrow's IPC stream writer; sealing (stream -> IPC file, the
background job); reads of sealed segments memory-mapped and zero-copy (PartitionLog.scan, and
PartitionLog.read with a 1 MiB fetch budget), each also summing every value byte so the data is
really touched, vs pyarrow `open_file(memory_map(...)).read_all()` of the same files.
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
from pylog.storage import RECORD_SCHEMA, BatchMeta, LogConfig, PartitionLog

BATCH = 16_384


def make_batch(value_size: int) -> tuple[pa.RecordBatch, BatchMeta]:
    rng = np.random.default_rng(1)
    values = rng.integers(0, 256, BATCH * value_size, dtype=np.uint8).tobytes()
    value_arr = pa.Array.from_buffers(pa.binary(), BATCH, [None, pa.py_buffer(
        np.arange(0, (BATCH + 1) * value_size, value_size, dtype=np.int32).tobytes()), pa.py_buffer(values)])
    keys = pa.array([b"key-%06d" % (i % 1000) for i in range(BATCH)], pa.binary())
    ts = pa.array(np.arange(BATCH, dtype=np.int64) + 1_700_000_000_000, pa.timestamp("ms"))
    headers = pa.array([[]] * BATCH, RECORD_SCHEMA.field("headers").type)
    offsets = pa.array(np.arange(BATCH, dtype=np.int64))
    rb = pa.RecordBatch.from_arrays([offsets, ts, keys, value_arr, headers], schema=RECORD_SCHEMA)
    meta = BatchMeta(0, BATCH - 1, BATCH, 1_700_000_000_000, 1_700_000_000_000 + BATCH - 1, 1, 0, 0, 0, 0)
    return rb, meta


def touch(batches: list[pa.RecordBatch]) -> int:
    """Read every value byte of the batches (as 8-byte words, so memory bandwidth, not the sum,
    is what is measured)."""
    total = 0
    for rb in batches:
        col = rb.column(3)
        _, offsets_buf, data = col.buffers()
        offsets = np.frombuffer(offsets_buf, np.int32, len(col) + 1, col.offset * 4)
        start, end = int(offsets[0]), int(offsets[-1])
        words = np.frombuffer(data, np.uint64, (end - start) // 8, start - start % 8)
        total += int(np.bitwise_xor.reduce(words)) if len(words) else 0
    return total


def timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def run(value_size: int, total: int, root: Path) -> list[tuple[str, str, float, float]]:
    rb, meta = make_batch(value_size)
    n_batches = max(1, total // BATCH)
    records = n_batches * BATCH
    payload = records * value_size / 1e6
    rows: list[tuple[str, str, float, float]] = []
    label = f"{value_size} B"

    d = root / f"bench-{value_size}"
    peer = root / f"peer-{value_size}.arrows"
    best_log = best_peer = float("inf")
    for attempt in range(2):  # alternate, so page-cache writeback does not favour either side
        shutil.rmtree(d, ignore_errors=True)
        log = PartitionLog.open(d, LogConfig(segment_bytes=256 << 20), now_ms=0)
        t = time.perf_counter()
        for _ in range(n_batches):
            log.append(rb, meta, now_ms=0)
        best_log = min(best_log, time.perf_counter() - t)
        if attempt == 0:
            log.close()
        t = time.perf_counter()
        with pa.OSFile(str(peer), "wb") as sink, ipc.new_stream(sink, RECORD_SCHEMA) as w:
            for _ in range(n_batches):
                w.write_batch(rb)
        best_peer = min(best_peer, time.perf_counter() - t)
        peer.unlink()
    rows.append((label, "append: PartitionLog.append", records / best_log, payload / best_log))
    rows.append((label, "append peer: pyarrow IPC stream writer", records / best_peer, payload / best_peer))

    log.roll()
    t = time.perf_counter()
    log.seal_pending()
    dt = time.perf_counter() - t
    rows.append((label, "seal: stream -> IPC file (background job)", records / dt, payload / dt))

    dt, _ = timed(lambda: touch(list(log.scan())))
    rows.append((label, "read sealed: scan + sum every value byte", records / dt, payload / dt))

    def fetch_all() -> int:
        off, n = 0, 0
        end = log.log_end_offset
        while off < end:
            got = log.read(off, 1 << 20)
            n += touch([b.records for b in got])
            off = got[-1].meta.next_offset
        return n

    dt, _ = timed(fetch_all)
    rows.append((label, "read sealed: read(1 MiB budget) + sum bytes", records / dt, payload / dt))

    files = sorted(d.glob("*.arrow"))

    def peer_read() -> int:
        out = []
        for f in files:
            out.extend(ipc.open_file(pa.memory_map(str(f))).read_all().to_batches())
        return touch(out)

    dt, _ = timed(peer_read)
    rows.append((label, "read peer: pyarrow open_file(memory_map) + sum", records / dt, payload / dt))
    log.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records-100b", type=int, default=4_000_000)
    ap.add_argument("--records-1kb", type=int, default=400_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-", dir=args.dir))
    try:
        rows = run(100, args.records_100b, root) + run(1000, args.records_1kb, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'records':>8}  {'operation':<48} {'records/s':>14} {'payload MB/s':>13}")
    for label, op, rps, mbps in rows:
        print(f"{label:>8}  {op:<48} {rps:>14,.0f} {mbps:>13,.0f}")


if __name__ == "__main__":
    main()
