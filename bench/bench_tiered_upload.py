"""Upload throughput of the remote tier's copy path: sealed-segment-sized files (four objects per
segment, as the RemoteLogManager copies them) through its bounded thread pool, to a local
directory (file://) and to an S3-compatible server on loopback (moto's server mode), side by side.

    python bench/bench_tiered_upload.py                       # 16 segments of 8 MiB, 10 threads
    python bench/bench_tiered_upload.py --segments 8 --segment-mib 64 --threads 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from pylog.storage.remote_store import open_remote_store

from pylog.testing_s3 import S3TestServer
from pylog.tiered.store_io import StoreExecutor

SIDE_FRACTION = 0.02  # index, time index and batch files are small beside the data file


def make_segments(root: Path, count: int, size: int) -> list[list[tuple[str, str]]]:
    out = []
    blob = os.urandom(size)
    side = blob[: max(1, int(size * SIDE_FRACTION))]
    for i in range(count):
        files = []
        for ext, data in ((".arrow", blob), (".index", side), (".timeindex", side), (".batches", side)):
            path = root / f"{i:020d}{ext}"
            path.write_bytes(data)
            files.append((f"bench/0/segments/{i:020d}-0-{i:032x}{ext}", str(path)))
        out.append(files)
    return out


async def upload(uri: str, options: dict[str, str], segments: list[list[tuple[str, str]]], threads: int,
                 concurrent: int) -> tuple[float, int]:
    io = StoreExecutor(open_remote_store(uri, options), threads=threads)
    sem = asyncio.Semaphore(concurrent)

    async def one(pairs: list[tuple[str, str]]) -> int:
        async with sem:
            return await io.put_files(pairs)

    started = time.perf_counter()
    sizes = await asyncio.gather(*(one(s) for s in segments))
    elapsed = time.perf_counter() - started
    io.close()
    return elapsed, sum(sizes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--segment-mib", type=float, default=8)
    ap.add_argument("--threads", type=int, default=10, help="remote.log.manager.copier.thread.pool.size")
    ap.add_argument("--concurrent", type=int, default=1,
                    help="segments in flight (1: one partition's leader copies in offset order)")
    args = ap.parse_args()
    size = int(args.segment_mib * 1024 * 1024)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "local").mkdir()
        segments = make_segments(Path(tmp) / "local", args.segments, size)
        local_uri = f"file://{tmp}/remote"
        elapsed, total = asyncio.run(upload(local_uri, {}, segments, args.threads, args.concurrent))
        rows.append(("file://", elapsed, total))
        with S3TestServer() as s3:
            elapsed, total = asyncio.run(upload(s3.uri("bench"), s3.options, segments, args.threads,
                                                args.concurrent))
            rows.append(("s3 (moto server, loopback)", elapsed, total))
    print(f"{args.segments} segments x {args.segment_mib} MiB (+ side files), {args.threads} threads, "
          f"{args.concurrent} segment(s) in flight")
    print(f"{'store':<28} {'seconds':>8} {'MiB/s':>8} {'segments/s':>11}")
    for name, elapsed, total in rows:
        print(f"{name:<28} {elapsed:8.2f} {total / elapsed / 2**20:8.1f} {args.segments / elapsed:11.1f}")


if __name__ == "__main__":
    main()
