"""Remote segments read exactly as local sealed segments: same rows, same batches, same wire bytes;
the read-ahead cache stays in its budget; a pinned manifest keeps reading after it is superseded;
local and remote parts merge without gaps or duplicates."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pylog.storage import PartitionLog
from pylog.storage.remote_cache import RemoteReadCache
from pylog.storage.remote_layout import ManifestMetadata, read_manifest, segment_keys
from pylog.storage.remote_segment import RemoteLog
from pylog.storage.remote_store import RemoteObjectNotFound, RemoteStore
from pylog.storage.tiered_log import TieredLog

from pylog.broker.datapath.batch_bytes import encode_stored
from tests.tiered.tiered_helpers import TS0, drop_local, sealed_segments, upload, write_partition

TOPIC = "events"
TID = uuid.UUID(int=0xABCDEF)


@pytest.fixture
def cache() -> Iterator[RemoteReadCache]:
    with RemoteReadCache(256 << 10, chunk_bytes=16 << 10, readahead=4) as c:
        yield c


def _partition(tmp_path: Path) -> PartitionLog:
    return write_partition(tmp_path / f"{TOPIC}-0", batches=120, per_batch=40, segment_bytes=32 << 10)


def test_remote_reads_equal_local_reads(tmp_path: Path, store: RemoteStore, cache: RemoteReadCache) -> None:
    local = _partition(tmp_path)
    manifest = upload(local.dir, store, TOPIC, TID, 0)
    assert len(manifest.segments) >= 4
    remote = RemoteLog.from_manifest(store, manifest, cache)
    end = remote.log_end_offset
    assert (remote.log_start_offset, end) == (0, manifest.segments[-1].end_offset + 1)
    assert remote.read_table().equals(local.read_table(0, end))
    assert remote.read_table(1234, 3333).equals(local.read_table(1234, 3333))
    np.testing.assert_array_equal(remote.batch_metadata(100, 4000), local.batch_metadata(100, 4000))
    for start, budget in [(0, 1), (0, 5000), (777, 20000), (end - 5, 1 << 20), (1599, 3000)]:
        r = remote.read(start, budget, max_offset=end)
        loc = local.read(start, budget, max_offset=end)
        assert [b.meta for b in r] == [b.meta for b in loc]
        wire = [encode_stored(b.meta, b.records) for b in loc]
        assert [encode_stored(b.meta, b.records) for b in r] == wire
    for ts in (TS0, TS0 + 50_500, TS0 + 10**9):
        assert remote.offset_for_timestamp(ts) == local.offset_for_timestamp(ts, max_offset=end)
    local.close()


def test_cache_stays_in_budget_and_reads_ahead(tmp_path: Path, store: RemoteStore) -> None:
    local = write_partition(tmp_path / f"{TOPIC}-0", batches=200, per_batch=50, segment_bytes=64 << 10,
                            value_size=100)
    manifest = upload(local.dir, store, TOPIC, TID, 0)
    with RemoteReadCache(128 << 10, chunk_bytes=8 << 10, readahead=4) as cache:
        remote = RemoteLog.from_manifest(store, manifest, cache)
        rows = 0
        offset = 0
        while offset < remote.log_end_offset:  # a consumer's sequential fetches
            got = remote.read(offset, 16 << 10)
            rows += sum(b.records.num_rows for b in got)
            offset = got[-1].meta.next_offset
            assert cache.cached_bytes <= 128 << 10
        assert rows == remote.log_end_offset
        assert cache.stats.prefetches > 0 and cache.stats.hits > cache.stats.misses
        assert cache.stats.bytes_fetched < 2 * sum((local.dir / f"{b:020d}.arrow").stat().st_size
                                                   for b in sealed_segments(local.dir))
    local.close()


def test_pinned_manifest_reads_after_it_is_superseded(tmp_path: Path, store: RemoteStore,
                                                      cache: RemoteReadCache) -> None:
    local = _partition(tmp_path)
    v1 = upload(local.dir, store, TOPIC, TID, 0, version=10)
    meta = ManifestMetadata(store)
    planned = meta.remote_segments(TOPIC, TID, 0)
    # retention moves on: manifest 20 drops the first two segments (their objects stay for the grace period)
    later = v1.segments[2:]
    from pylog.storage.remote_layout import RemoteManifest, manifest_key
    v2 = RemoteManifest(TOPIC, TID, 0, 20, later[0].base_offset, later)
    store.put_bytes(manifest_key(v1.prefix, 20), v2.encode())
    assert read_manifest(store, v1.prefix).version == 20
    assert meta.remote_segments(TOPIC, TID, 0) == planned  # pinned
    remote = RemoteLog(store, v1.prefix, planned, cache, log_start_offset=0, version=10)
    assert remote.read_table().equals(local.read_table(0, remote.log_end_offset))
    # once the grace period is over the objects go: a clear error, not a wrong answer
    from pylog.storage.remote_layout import segment_keys
    store.delete(segment_keys(v1.prefix, v1.segments[0]))
    stale = RemoteLog(store, v1.prefix, planned, RemoteReadCache(1 << 20), version=10)
    with pytest.raises(RemoteObjectNotFound, match="does not exist"):
        stale.read_table()
    local.close()


def test_pruning_by_offsets_and_time(tmp_path: Path, store: RemoteStore, cache: RemoteReadCache) -> None:
    local = _partition(tmp_path)
    manifest = upload(local.dir, store, TOPIC, TID, 0)
    remote = RemoteLog.from_manifest(store, manifest, cache)
    segs = manifest.segments
    assert remote.segments_in(0) == list(segs)
    mid = segs[2]
    assert remote.segments_in(mid.base_offset, mid.end_offset + 1) == [mid]
    assert remote.segments_in(0, min_timestamp=mid.max_timestamp) == list(segs[2:])
    assert remote.segments_in(segs[-1].end_offset + 1) == []
    local.close()


@pytest.mark.parametrize("overlap", [0, 1], ids=["gapless", "overlapping"])
def test_tiered_log_merges_remote_and_local(tmp_path: Path, store: RemoteStore, cache: RemoteReadCache,
                                            overlap: int) -> None:
    local = _partition(tmp_path)
    everything = local.read_table()
    full_meta = local.batch_metadata()
    manifest = upload(local.dir, store, TOPIC, TID, 0, count=4)
    remote_end = manifest.segments[-1].end_offset + 1
    path = local.dir
    local.close()
    # local retention dropped every uploaded segment but the last `overlap` of them
    drop_local(path, manifest.segments[len(manifest.segments) - 1 - overlap].end_offset + 1
               if overlap else remote_end)
    shutil.rmtree(path.parent / "unused", ignore_errors=True)
    reopened = PartitionLog.open_readonly(path)
    assert reopened.log_start_offset == (manifest.segments[-1].base_offset if overlap else remote_end)
    tiered = TieredLog(RemoteLog.from_manifest(store, manifest, cache), reopened)
    assert (tiered.log_start_offset, tiered.log_end_offset) == (0, everything.num_rows)
    assert tiered.local_start == remote_end
    merged = tiered.read_table()
    assert merged.equals(everything)
    np.testing.assert_array_equal(tiered.batch_metadata()[["base_offset", "record_count"]],
                                  full_meta[["base_offset", "record_count"]])
    assert tiered.read_table(remote_end - 7, remote_end + 9).equals(everything.slice(remote_end - 7, 16))
    # a consumer's fetches from offset 0 see every offset once, in order
    offset, seen = 0, []
    while offset < tiered.log_end_offset:
        got = tiered.read(offset, 10_000)
        seen.extend(pa.concat_arrays([b.records.column(0) for b in got]).to_pylist())
        offset = got[-1].meta.next_offset
    assert seen == list(range(everything.num_rows))
    assert tiered.offset_for_timestamp(TS0 + 119_000) == reopened.offset_for_timestamp(TS0 + 119_000)
    assert tiered.max_timestamp_and_offset() == (TS0 + 119_039, everything.num_rows - 1)
    tiered.close()


def test_whole_segment_scans_read_each_object_in_one_pass(tmp_path: Path, store: RemoteStore,
                                                          cache: RemoteReadCache) -> None:
    """A scan covering whole segments reads each data object front to back (no side files, no
    cache); a segment whose object begins below its base offset (a new leader's first copy) gives
    only its own offsets."""
    import dataclasses

    local = _partition(tmp_path)
    manifest = upload(local.dir, store, TOPIC, TID, 0)
    end = manifest.segments[-1].end_offset + 1
    second = manifest.segments[1]
    moved = dataclasses.replace(second, base_offset=second.base_offset + 7)
    for key, old in zip(segment_keys(manifest.prefix, moved), segment_keys(manifest.prefix, second)):
        if store.exists(old):
            store.put_bytes(key, store.read_bytes(old))
    shifted = dataclasses.replace(manifest, log_start_offset=moved.base_offset,
                                  segments=(moved, *manifest.segments[2:]))
    for m in (manifest, shifted):
        remote = RemoteLog.from_manifest(store, m, cache)
        before = cache.stats.misses
        assert remote.read_table().equals(local.read_table(m.log_start_offset, end))
        assert cache.stats.misses == before, "whole segments bypass the cache"
    local.close()
