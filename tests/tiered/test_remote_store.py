"""The remote store over a local directory and over a real S3-compatible HTTP server (moto)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pylog.storage.remote_layout import (
    RemoteLogSegment,
    RemoteManifest,
    covering,
    manifest_key,
    manifest_versions,
    new_segment_id,
    partition_prefix,
    read_manifest,
    segment_key,
    segment_keys,
    topic_dirs,
)
from pylog.storage.remote_store import (
    RemoteObjectNotFound,
    RemoteStorageError,
    RemoteStore,
    open_remote_store,
)

from pylog.testing_s3 import S3TestServer


def _segment(base: int, end: int, epoch: int = 0) -> RemoteLogSegment:
    return RemoteLogSegment(new_segment_id(), base, end, 1_700_000_000_000 + end, 4096, epoch,
                            ((epoch, base),))


def test_objects_round_trip_with_ranged_reads(store: RemoteStore) -> None:
    data = os.urandom(9 << 20)  # above pyarrow's multipart threshold on S3
    store.put_bytes("a/b/obj", data)
    assert store.read_bytes("a/b/obj") == data
    assert store.size("a/b/obj") == len(data)
    with store.open("a/b/obj") as f:
        f.seek(5 << 20)
        assert f.read(100) == data[5 << 20:(5 << 20) + 100]
    assert [o.key for o in store.list("a")] == ["a/b/obj"]
    store.delete(["a/b/obj", "a/b/never-written"])
    assert store.list("a") == []
    with pytest.raises(RemoteObjectNotFound, match="does not exist"):
        store.read_bytes("a/b/obj")


def test_put_file_copies_a_local_file(store: RemoteStore, tmp_path: Path) -> None:
    src = tmp_path / "seg.arrow"
    src.write_bytes(b"ARROW1" + os.urandom(1000))
    store.put_file("x/seg.arrow", src)
    assert store.read_bytes("x/seg.arrow") == src.read_bytes()


def test_manifests_are_versioned_and_the_newest_wins(store: RemoteStore) -> None:
    tid = uuid.uuid4()
    prefix = partition_prefix("orders", tid, 3)
    s0, s1 = _segment(0, 99, 1), _segment(100, 199, 2)
    for version, segs in ((5, (s0,)), (9, (s0, s1))):
        manifest = RemoteManifest("orders", tid, 3, version, 0, segs)
        store.put_bytes(manifest_key(prefix, version), manifest.encode())
    for s in (s0, s1):
        for key in segment_keys(prefix, s):
            store.put_bytes(key, b"x")
    assert manifest_versions(store, prefix) == [5, 9]
    latest = read_manifest(store, prefix)
    assert latest is not None and latest.version == 9 and latest.segments == (s0, s1)
    assert latest.end_offset == 200
    pinned = read_manifest(store, prefix, 5)
    assert pinned is not None and pinned.segments == (s0,)
    assert topic_dirs(store, "orders") == {tid: [3]}
    assert topic_dirs(store, "order") == {}
    assert covering(latest.segments, 150) == [s1]
    assert covering(latest.segments, 0, 100) == [s0]
    assert segment_key(prefix, s1, ".arrow").endswith(f"/segments/{100:020d}-2-{s1.segment_id}.arrow")


def test_bad_uris_are_refused_with_a_plain_message(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scheme must be file:// or s3://"):
        open_remote_store("gs://bucket/x")
    with pytest.raises(ValueError, match="no bucket"):
        open_remote_store("s3:///x")
    with pytest.raises(ValueError, match="absolute path"):
        open_remote_store("relative/dir")
    with pytest.raises(ValueError, match="unknown S3 option"):
        open_remote_store("s3://b/x", {"endpoint": "http://127.0.0.1:1"})
    with pytest.raises(ValueError, match="expected http"):
        open_remote_store("s3://b/x", {"endpoint_url": "127.0.0.1:1"})


def test_a_store_behind_refusals_and_timeouts_still_completes_or_says_why(s3: S3TestServer) -> None:
    from pylog.testing_s3 import S3FaultProxy

    with S3FaultProxy(s3.endpoint_url, seed=7, refuse=0.1) as proxy:
        opts = dict(s3.options, endpoint_url=proxy.endpoint_url, request_timeout_s="2")
        store = open_remote_store(s3.uri("faulty"), opts)
        payloads = {f"k{i}": os.urandom(1000 + i) for i in range(8)}
        for key, data in payloads.items():  # SlowDown is retried by the client
            store.put_bytes(key, data)
        assert {k: store.read_bytes(k) for k in payloads} == payloads
        assert proxy.counts["refused"] > 0 and proxy.counts["forwarded"] >= 16
        impatient = open_remote_store(s3.uri("faulty"), dict(opts, request_timeout_s="1", max_attempts="2"))
        proxy.set_faults(refuse=1.0)
        with pytest.raises(RemoteStorageError, match="cannot write"):
            impatient.put_bytes("never", b"x")
        proxy.set_faults(delay=1.0)
        proxy.delay_s = 3.0
        with pytest.raises(RemoteStorageError):
            impatient.read_bytes("k0")
