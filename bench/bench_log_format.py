"""PartitionLog in format 1 (Arrow columns + `.wire`) against format 2 (one copy), side by side.

    python bench/bench_log_format.py [--mb 16] [--record-mb 4] [--dir PATH]

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
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_onecopy import RECORD, producer_batches
from pylog.protocol.records import decode_batch, set_base_offset
from pylog.storage import BatchMeta, LogConfig, PartitionLog

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--record-mb", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-log-format-", dir=args.dir))
    head = (f"{'lz4 batch':9} | {'disk/B active v1':>16} {'v2':>5} | {'sealed v1':>9} {'v2':>5} | "
            f"{'append ms/MB v1':>15} {'v2':>6} | {'seal ms/MB v1':>13} {'v2':>6} | "
            f"{'fetch ms/MB v1':>14} {'v2':>6}")
    print(head)
    print("-" * len(head))
    try:
        for batch_bytes, label in ((1 << 20, "1 MiB"), (16 << 10, "16 KiB")):
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
        for per in (50, 1000):
            batches = producer_batches(per * RECORD, args.record_mb << 20, "lz4")
            n = per * len(batches)
            one, two = run(1, batches, root / "r-1"), run(2, batches, root / "r-2")
            us = {k: r["append"] / n * 1e6 for k, r in (("v1", one), ("v2", two))}
            print(f"{per:5} records | {us['v1']:19.2f} {us['v2']:6.2f}", flush=True)
            shutil.rmtree(root / "r-1", ignore_errors=True)
            shutil.rmtree(root / "r-2", ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
