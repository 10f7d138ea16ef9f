"""Fixtures for remote-tier read tests: a partition written with small segments, its sealed segments
copied into a store under the remote layout with a manifest, and local segments dropped as a broker
drops them past local retention."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
from pylog.storage import RECORD_SCHEMA, BatchMeta, LogConfig, PartitionLog
from pylog.storage.remote_layout import (
    RemoteLogSegment,
    RemoteManifest,
    manifest_key,
    new_segment_id,
    partition_prefix,
    segment_key,
)
from pylog.storage.remote_store import RemoteStore
from pylog.storage.schema import BATCH_DTYPE, TIME_DTYPE
from pylog.storage.wire import WireEncoder

TS0 = 1_700_000_000_000


def batch(first: int, n: int, *, ts: int, value_size: int = 20) -> tuple[pa.RecordBatch, BatchMeta]:
    """A producer's batch of ``n`` records (record i of the partition has value b"v<i>...")."""
    vals = [(b"v%d-" % (first + i)).ljust(value_size, b"x") for i in range(n)]
    keys = [b"k%d" % ((first + i) % 97) for i in range(n)]
    tss = [ts + i for i in range(n)]
    hdrs: list[list[dict[str, object]]] = [[{"key": "h", "value": b"%d" % (first + i)}] for i in range(n)]
    rb = pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int64()), pa.array(tss, pa.timestamp("ms")), pa.array(keys, pa.binary()),
         pa.array(vals, pa.binary()), pa.array(hdrs, RECORD_SCHEMA.field("headers").type)],
        schema=RECORD_SCHEMA)
    return rb, BatchMeta(0, n - 1, n, tss[0], tss[-1], partition_leader_epoch=0)


def write_partition(path: Path, *, batches: int, per_batch: int, segment_bytes: int = 64 << 10,
                    value_size: int = 20, ts_step: int = 1000,
                    wire: WireEncoder | None = None) -> PartitionLog:
    """A partition log of ``batches`` batches, rolled every ``segment_bytes`` and sealed; record i
    has timestamp TS0 + (i // per_batch) * ts_step + i % per_batch. With ``wire``, sealed segments
    get their `.wire` files."""
    # format 1: these Arrow rows have no Kafka decoder (format 2 needs one), and its `.wire` files
    log = PartitionLog.open(path, LogConfig(segment_bytes=segment_bytes, segment_format=1), now_ms=TS0)
    log.wire_encoder = wire
    for b in range(batches):
        rb, meta = batch(b * per_batch, per_batch, ts=TS0 + b * ts_step, value_size=value_size)
        log.append(rb, meta, now_ms=TS0 + b * ts_step)
    log.roll()
    log.seal_pending()
    log.flush()
    return log


def sealed_segments(path: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in path.glob("*.arrow"))


def upload(path: Path, store: RemoteStore, topic: str, topic_id: uuid.UUID, partition: int, *,
           count: int | None = None, version: int = 1, previous: RemoteManifest | None = None,
           log_start_offset: int | None = None) -> RemoteManifest:
    """Copy the first ``count`` sealed segments of the partition directory (not already in
    ``previous``) into the store under the remote layout, then write manifest ``version``."""
    prefix = partition_prefix(topic, topic_id, partition)
    done = {s.base_offset for s in previous.segments} if previous else set()
    segs = list(previous.segments) if previous else []
    for base in sealed_segments(path)[:count]:
        if base in done:
            continue
        stem = path / f"{base:020d}"
        b = np.fromfile(f"{stem}.batches", BATCH_DTYPE)
        t = np.fromfile(f"{stem}.timeindex", TIME_DTYPE)
        end = int(b["base_offset"][-1]) + int(b["last_offset_delta"][-1])
        size = sum(os.path.getsize(f"{stem}{ext}") for ext in (".arrow", ".index", ".timeindex", ".batches"))
        seg = RemoteLogSegment(new_segment_id(), base, end, int(t["timestamp"][-1]), size, 0, ((0, base),))
        for ext in (".arrow", ".index", ".timeindex", ".batches", ".wire"):
            if ext != ".wire" or os.path.exists(f"{stem}{ext}"):
                store.put_file(segment_key(prefix, seg, ext), f"{stem}{ext}")
        segs.append(seg)
    segs.sort(key=lambda s: s.base_offset)
    start = log_start_offset if log_start_offset is not None else (segs[0].base_offset if segs else 0)
    manifest = RemoteManifest(topic, topic_id, partition, version, start, tuple(segs))
    store.put_bytes(manifest_key(prefix, version), manifest.encode())
    return manifest


def drop_local(path: Path, below: int) -> None:
    """Delete the local segments whose offsets all lie below ``below`` (as local retention does;
    the partition must be closed)."""
    bases = sorted(int(p.name[:20]) for p in path.iterdir() if p.name[:20].isdigit())
    bases = sorted(set(bases))
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        if nxt is None or nxt > below:
            break
        for ext in (".arrow", ".arrows", ".index", ".timeindex", ".batches"):
            p = path / f"{base:020d}{ext}"
            if p.exists():
                p.unlink()
