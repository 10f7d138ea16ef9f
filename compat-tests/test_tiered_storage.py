"""The remote tier's write side against real broker processes: sealed segments are copied to the
store (file:// and an S3-compatible server), committed through the metadata log, described by
manifests, and leave local disk past local retention; leaders crash between upload and commit and
between commit and local delete, and afterwards every acknowledged record is held exactly once by
local disk plus the store, nothing dangles and orphans are collected after the grace period."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from compat_broker import BrokerProcess, used_brokers
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pylog.storage import read_segments
from pylog.storage.remote_layout import (
    RemoteManifest,
    manifest_versions,
    partition_prefix,
    read_manifest,
    segment_key,
    topic_dirs,
)
from pylog.storage.remote_store import RemoteStore, open_remote_store

RECORDS = 3000
VALUE = b"v" * 200


def tier_config(uri: str, **extra: str) -> dict[str, str]:
    return {"remote.log.storage.system.enable": "true", "remote.log.storage.uri": uri,
            "remote.log.manager.task.interval.ms": "200", "remote.log.reader.grace.ms": "1500", **extra}


def create_topic(bootstrap: str, name: str, *, rf: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=1, replication_factor=rf, config={
        "remote.storage.enable": "true", "segment.bytes": "65536", "local.retention.bytes": "100000",
        **configs})
    for f in admin.create_topics([topic], operation_timeout=30).values():
        f.result(timeout=30)


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> int:
    """Produce ``count`` records (values carry their sequence number), acks=all; the number acknowledged."""
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                  "batch.num.messages": 50})

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(msg.offset())

    for i in range(start, start + count):
        p.produce(topic, value=VALUE + str(i).encode(), on_delivery=done)
        p.poll(0)
    assert p.flush(30) == 0
    return len(acked)


def wait_for(check: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what}")


def manifest_of(store: RemoteStore, topic: str) -> RemoteManifest | None:
    dirs = topic_dirs(store, topic)
    if not dirs:
        return None
    tid = next(iter(dirs))
    return read_manifest(store, partition_prefix(topic, tid, 0))


def remote_offsets(store: RemoteStore, manifest: RemoteManifest) -> list[int]:
    """Every offset the manifest's segments serve, read from the objects with pyarrow."""
    out: list[int] = []
    for seg in manifest.segments:
        data = store.read_bytes(segment_key(manifest.prefix, seg, ".arrow"))
        table = ipc.open_file(pa.py_buffer(data)).read_all()
        offsets = table.column("offset").to_pylist()
        out += [o for o in offsets if seg.base_offset <= o <= seg.end_offset]
    return out


def local_offsets(partition_dir: Path) -> list[int]:
    """The offsets on local disk (read again when the broker deletes a segment meanwhile)."""
    for _ in range(20):
        try:
            return read_segments(partition_dir).column("offset").to_pylist()
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError(f"{partition_dir} kept changing under the reader")


@pytest.fixture
def tiered_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    remote = tmp_path / "remote"
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config=tier_config(f"file://{remote}"))
    used_brokers(request.node).append(b)
    b.start()
    yield b
    if b.alive():
        b.stop()


def test_single_broker_copies_commits_and_drops_local_segments(
    tmp_path: Path, tiered_broker: BrokerProcess
) -> None:
    b = tiered_broker
    remote = tmp_path / "remote"
    if True:
        topic = f"tiered-{uuid.uuid4().hex[:8]}"
        create_topic(b.bootstrap, topic)
        assert produce(b.bootstrap, topic, RECORDS) == RECORDS
        store = open_remote_store(f"file://{remote}")
        part_dir = tmp_path / "data" / f"{topic}-0"

        def settled() -> RemoteManifest | None:
            m = manifest_of(store, topic)
            if m is None or not m.segments:
                return None
            local = local_offsets(part_dir)
            # local retention: the local part shrank to about local.retention.bytes, the rest is remote
            return m if local and local[0] > 0 and local[0] <= m.end_offset else None

        m = wait_for(settled, 40, "segments copied and local segments deleted")
        offsets = remote_offsets(store, m)
        local = local_offsets(part_dir)
        merged = sorted(set(offsets) | set(local))
        assert merged == list(range(RECORDS)), "every acknowledged record is in the store or on disk"
        assert len(offsets) == len(set(offsets)), "no offset is in two remote segments"
        assert offsets[0] == 0 and m.log_start_offset == 0
        # local segments deleted are covered by committed remote segments
        assert local[0] <= m.end_offset + 1
        # every segment has its four objects; the manifest's version is a metadata offset
        for seg in m.segments:
            for ext in (".arrow", ".index", ".timeindex", ".batches"):
                assert store.exists(segment_key(m.prefix, seg, ext))
        assert m.version > 0
        # the broker restarts and recovers both starts: nothing is copied twice, the log start stays 0
        b.restart()
        assert produce(b.bootstrap, topic, 500, RECORDS) == 500
        m2 = wait_for(lambda: (x := manifest_of(store, topic)) and x.version > m.version and x, 30,
                      "a newer manifest after the restart")
        again = remote_offsets(store, m2)
        assert len(again) == len(set(again)) and again[0] == 0
        merged = sorted(set(again) | set(local_offsets(part_dir)))
        assert merged == list(range(RECORDS + 500))
        # superseded manifests are collected after the grace period
        wait_for(lambda: len(manifest_versions(store, m2.prefix)) <= 2, 20, "old manifests collected")
