"""read_topic / scan_topic over the remote tier: with a data directory, from the store alone, with
offset and time bounds pruning whole segments, and with one manifest version per read."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pyarrow.compute as pc
import pytest
from pylog.storage.remote_layout import RemoteManifest, manifest_key
from pylog.storage.remote_store import open_remote_store

import pylog
from pylog.sdk.dir_source import DirTopicSource
from pylog.sdk.offsets import PartitionRange, UnknownTopicError
from pylog.sdk.remote_source import RemoteStorageSpec, RemoteTier
from pylog.testing_s3 import S3TestServer
from tests.tiered.tiered_helpers import TS0, drop_local, upload, write_partition

TOPIC = "clicks"
TID = uuid.UUID(int=0x5EED)
BATCHES, PER_BATCH = 100, 30
TOTAL = BATCHES * PER_BATCH


@pytest.fixture(params=["file", "s3"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteStorageSpec:
    if request.param == "file":
        return RemoteStorageSpec(f"file://{tmp_path}/tier")
    server: S3TestServer = request.getfixturevalue("s3")
    return RemoteStorageSpec(server.uri(f"sdk-{uuid.uuid4().hex[:8]}"), server.options)


def _tiered_dir(tmp_path: Path, spec: RemoteStorageSpec) -> tuple[Path, dict[int, RemoteManifest]]:
    """Two partitions; each has its first 4 segments in the store and only the rest on disk."""
    data = tmp_path / "data"
    store = open_remote_store(spec.uri, spec.options)
    manifests = {}
    for p in (0, 1):
        log = write_partition(data / f"{TOPIC}-{p}", batches=BATCHES, per_batch=PER_BATCH,
                              segment_bytes=24 << 10)
        manifests[p] = upload(log.dir, store, TOPIC, TID, p, count=4, version=7 + p)
        log.close()
        drop_local(data / f"{TOPIC}-{p}", manifests[p].end_offset)
    return data, manifests


def _values(first: int, last: int) -> list[bytes]:
    return [(b"v%d-" % i).ljust(20, b"x") for i in range(first, last)]


def test_data_dir_with_store_reads_the_whole_history(tmp_path: Path, spec: RemoteStorageSpec) -> None:
    data, manifests = _tiered_dir(tmp_path, spec)
    local_only = pylog.read_topic(TOPIC, data_dir=data, partitions=[0])
    assert local_only["offset"][0].as_py() == manifests[0].end_offset  # the disk lost its history
    t = pylog.read_topic(TOPIC, data_dir=data, remote_storage=spec.uri, storage_options=dict(spec.options))
    for p in (0, 1):
        rows = t.filter(pc.equal(t["partition"], p))
        assert rows["offset"].to_pylist() == list(range(TOTAL))
        assert rows["value"].to_pylist() == _values(0, TOTAL)
    # the same through the batch reader, with headers, bounded across the remote / local boundary
    cut = manifests[1].end_offset
    scan = pylog.scan_topic(TOPIC, data_dir=data, remote_storage=spec.uri, storage_options=dict(spec.options),
                            partitions=[1], starting_offsets={TOPIC: {"1": cut - 10}},
                            ending_offsets={TOPIC: {"1": cut + 10}}, include_headers=True)
    rows = [r for b in scan.to_batches() for r in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(cut - 10, cut + 10))
    assert [r["headers"][0]["value"] for r in rows] == [b"%d" % i for i in range(cut - 10, cut + 10)]


def test_store_only_read(tmp_path: Path, spec: RemoteStorageSpec) -> None:
    _data, manifests = _tiered_dir(tmp_path, spec)
    t = pylog.read_topic(TOPIC, remote_storage=spec.uri, storage_options=dict(spec.options))
    for p in (0, 1):
        rows = t.filter(pc.equal(t["partition"], p))
        assert rows["offset"].to_pylist() == list(range(manifests[p].end_offset))
    by_time = pylog.read_topic(TOPIC, remote_storage=spec.uri, storage_options=dict(spec.options),
                               partitions=[0], starting_timestamp=TS0 + 20_000)
    assert by_time["offset"][0].as_py() == 20 * PER_BATCH
    with pytest.raises(UnknownTopicError, match="no partition of it"):
        pylog.read_topic("nope", remote_storage=spec.uri, storage_options=dict(spec.options))
    with pytest.raises(ValueError, match="remote_storage must be a URI"):
        pylog.read_topic(TOPIC, remote_storage="bucket")


def test_bounds_prune_whole_segments(tmp_path: Path, spec: RemoteStorageSpec) -> None:
    _data, manifests = _tiered_dir(tmp_path, spec)
    segs = manifests[0].segments
    source = DirTopicSource(None, remote=RemoteTier(spec))
    try:
        target = segs[2]
        got = list(source.read([PartitionRange(TOPIC, 0, target.base_offset + 1, target.end_offset)],
                               ["offset", "value"]))
        assert sum(b.num_rows for _r, b in got) == target.end_offset - target.base_offset - 1
        arrows = {k for k in source.remote.cache.stats.objects if k.endswith(".arrow")}  # type: ignore[union-attr]
        assert arrows == {f"{manifests[0].prefix}/segments/{target.stem}.arrow"}
        found = source.offsets_for_times(TOPIC, {0: segs[3].max_timestamp})
        assert found[0] is not None and segs[3].base_offset <= found[0] <= segs[3].end_offset
        arrows = {k for k in source.remote.cache.stats.objects if k.endswith(".arrow")}  # type: ignore[union-attr]
        assert len(arrows) == 2  # the segment before it was pruned by its max timestamp
    finally:
        source.close()


def test_a_read_pins_the_manifest_it_planned_with(tmp_path: Path, spec: RemoteStorageSpec) -> None:
    _data, manifests = _tiered_dir(tmp_path, spec)
    m = manifests[0]
    store = open_remote_store(spec.uri, spec.options)
    source = DirTopicSource(None, remote=RemoteTier(spec))
    try:
        bounds = source.offset_bounds(TOPIC, [0])
        assert bounds[0] == (0, m.end_offset)
        # retention supersedes the manifest between planning and reading
        newer = RemoteManifest(TOPIC, TID, 0, m.version + 100, m.segments[2].base_offset, m.segments[2:])
        store.put_bytes(manifest_key(m.prefix, newer.version), newer.encode())
        rows = [b for _r, b in source.read([PartitionRange(TOPIC, 0, 0, m.end_offset)], ["offset"])]
        assert sum(b.num_rows for b in rows) == m.end_offset
    finally:
        source.close()
    # a new read plans with the newer version
    t = pylog.read_topic(TOPIC, remote_storage=spec.uri, storage_options=dict(spec.options), partitions=[0])
    assert t["offset"][0].as_py() == m.segments[2].base_offset


def test_segments_uploaded_and_deleted_locally_after_planning_are_read(
    tmp_path: Path, spec: RemoteStorageSpec
) -> None:
    """A read planned (its manifest pinned) before more segments were uploaded and then deleted from
    the data directory would find a gap between the pinned segments and the local log: it looks the
    manifest up again and reads every offset."""
    data = tmp_path / "data"
    path = data / f"{TOPIC}-0"
    store = open_remote_store(spec.uri, spec.options)
    log = write_partition(path, batches=BATCHES, per_batch=PER_BATCH, segment_bytes=24 << 10)
    first = upload(log.dir, store, TOPIC, TID, 0, count=2, version=1)
    drop_local(path, first.end_offset)
    source = DirTopicSource(data, remote=RemoteTier(spec))
    try:
        assert source.partitions(TOPIC) == [0]  # plans: manifest 1 pinned
        later = upload(log.dir, store, TOPIC, TID, 0, count=5, version=2, previous=first)
        log.close()
        drop_local(path, later.end_offset)  # the local log now starts past manifest 1's end
        got = [b for _r, b in source.read([PartitionRange(TOPIC, 0, 0, TOTAL)], ["offset"])]
    finally:
        source.close()
    offsets = [o for b in got for o in b.column(0).to_pylist()]
    assert offsets == list(range(TOTAL))


def test_transactions_across_the_tiers_read_committed(tmp_path: Path, spec: RemoteStorageSpec) -> None:
    """An aborted transaction in the store is skipped; a transaction whose records are in the store
    and whose COMMIT marker is only on disk is read with the data directory, and a store-only read
    stops before it (its outcome is not in the store: the last stable offset of what the store holds)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "sdk"))
    from sdk_helpers import LogWriter

    data = tmp_path / "data"
    w = LogWriter(data, "txn")
    w.append(10)
    a0, _ = w.append(5, producer_id=7, transactional=True)
    w.marker(7, commit=False)
    b0, b1 = w.append(5, producer_id=8, transactional=True)
    w.marker(8, commit=True)
    w.log.roll()
    w.append(10)
    c0, c1 = w.append(5, producer_id=9, transactional=True)
    w.log.roll()
    c_marker = w.marker(9, commit=True)
    p0, p1 = w.append(10)
    d0, _ = w.append(5, producer_id=10, transactional=True)  # still open
    w.log.seal_pending()
    store = open_remote_store(spec.uri, spec.options)
    manifest = upload(w.log.dir, store, "txn", TID, 0, count=2)
    w.close()
    assert manifest.end_offset == c1
    drop_local(data / "txn-0", manifest.end_offset)

    both = pylog.read_topic("txn", data_dir=data, remote_storage=spec.uri, storage_options=dict(spec.options))
    expected = [o for o in range(d0) if not a0 <= o < a0 + 5 and o not in (a0 + 5, b1, c_marker)]
    assert both["offset"].to_pylist() == expected
    assert set(range(b0, b1)) <= set(expected) and set(range(c0, c1)) <= set(expected)
    assert set(range(p0, p1)) <= set(expected)

    alone = pylog.read_topic("txn", remote_storage=spec.uri, storage_options=dict(spec.options))
    assert alone["offset"].to_pylist() == [o for o in expected if o < c0]
