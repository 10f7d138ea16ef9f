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
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
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
            "remote.log.manager.task.interval.ms": "200", "remote.log.reader.grace.ms": "1500",
            "pylog.remote.log.storage.upload.wire": "true", **extra}


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


def holds_exactly(store: RemoteStore, m: RemoteManifest) -> bool:
    """The store's segment objects are exactly the manifest's segments' four files plus, for any
    of them, its optional `.wire` (unfinished copies and orphans are gone)."""
    keys = {o.key for o in store.list(f"{m.prefix}/segments")}
    wanted = {segment_key(m.prefix, s, ext) for s in m.segments
              for ext in (".arrow", ".index", ".timeindex", ".batches")}
    wires = {segment_key(m.prefix, s, ".wire") for s in m.segments}
    return wanted <= keys and keys - wanted <= wires


def fault_row(scenario: str, acked: dict[int, bytes], held: dict[int, bytes]) -> None:
    """One row of the fault table (pytest -s shows it): acknowledged records, those not held as
    written, and values held at more than one offset."""
    values = list(held.values())
    lost = sum(1 for o, v in acked.items() if held.get(o) != v)
    print(f"\nFAULT-ROW | {scenario} | acknowledged {len(acked)} | lost {lost} | "
          f"duplicated {len(values) - len(set(values))}")


def local_values(partition_dir: Path) -> dict[int, bytes]:
    """Offset -> value on local disk (read again when the broker deletes a segment meanwhile)."""
    for _ in range(20):
        try:
            t = read_segments(partition_dir)
            return dict(zip(t.column("offset").to_pylist(), t.column("value").to_pylist(), strict=True))
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError(f"{partition_dir} kept changing under the reader")


def both_tiers(
    store: RemoteStore, topic: str, partition_dir: Path
) -> tuple[RemoteManifest | None, dict[int, bytes]]:
    """The committed manifest and the local records as one consistent view: local disk is read
    first, because a segment leaves local disk only after the manifest that holds it committed, so
    a manifest read afterwards covers every segment the local read missed (read in the other order,
    a segment copied and dropped in between is in neither)."""
    local = local_values(partition_dir)
    return manifest_of(store, topic), local


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
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    # format 1: its sealed segments have the `.wire` files whose upload is checked below
    create_topic(b.bootstrap, topic, **{"pylog.segment.format": "1"})
    assert produce(b.bootstrap, topic, RECORDS) == RECORDS
    store = open_remote_store(f"file://{remote}")
    part_dir = tmp_path / "data" / f"{topic}-0"

    def settled() -> tuple[RemoteManifest, dict[int, bytes]] | None:
        m, local = both_tiers(store, topic, part_dir)
        if m is None or not m.segments:
            return None
        # local retention: the local part shrank to about local.retention.bytes, the rest is remote
        return (m, local) if local and 0 < min(local) <= m.end_offset else None

    m, local = wait_for(settled, 40, "segments copied and local segments deleted")
    offsets = remote_offsets(store, m)
    merged = sorted(set(offsets) | set(local))
    assert merged == list(range(RECORDS)), "every acknowledged record is in the store or on disk"
    assert len(offsets) == len(set(offsets)), "no offset is in two remote segments"
    assert offsets[0] == 0 and m.log_start_offset == 0
    # local segments deleted are covered by committed remote segments
    assert min(local) <= m.end_offset + 1
    # every segment has its four objects; the manifest's version is a metadata offset
    for seg in m.segments:
        # .wire: pylog.segment.wire and pylog.remote.log.storage.upload.wire
        for ext in (".arrow", ".index", ".timeindex", ".batches", ".wire"):
            assert store.exists(segment_key(m.prefix, seg, ext))
    assert m.version > 0
    # the broker restarts and recovers both starts: nothing is copied twice, the log start stays 0
    b.restart()
    assert produce(b.bootstrap, topic, 500, RECORDS) == 500
    wait_for(lambda: (x := manifest_of(store, topic)) and x.version > m.version, 30,
             "a newer manifest after the restart")
    m2, local2 = both_tiers(store, topic, part_dir)
    assert m2 is not None
    again = remote_offsets(store, m2)
    assert len(again) == len(set(again)) and again[0] == 0
    assert sorted(set(again) | set(local2)) == list(range(RECORDS + 500))
    # superseded manifests are collected after the grace period
    wait_for(lambda: len(manifest_versions(store, m2.prefix)) <= 2, 20, "old manifests collected")


def low_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex[:6]}"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0])
    finally:
        c.close()


def test_delete_records_retention_orphans_and_topic_deletion_reach_the_store(
    tmp_path: Path, tiered_broker: BrokerProcess
) -> None:
    b = tiered_broker
    store = open_remote_store(f"file://{tmp_path / 'remote'}")
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create_topic(b.bootstrap, topic)
    assert produce(b.bootstrap, topic, RECORDS) == RECORDS
    m = wait_for(lambda: (x := manifest_of(store, topic)) and x.end_offset > 1500 and x, 30, "copies")
    # an object the metadata does not know (a deposed leader's late upload) goes after the grace period
    orphan = f"{m.prefix}/segments/{0:020d}-99-{'ab' * 16}.arrow"
    store.put_bytes(orphan, b"late upload")
    wait_for(lambda: not store.exists(orphan), 20, "the orphan collected")

    # DeleteRecords: the log start moves into the remote range; segments wholly below it leave the store
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.delete_records([TopicPartition(topic, 0, 1000)]).values():
        f.result(timeout=30)
    assert low_watermark(b.bootstrap, topic) == 1000
    below = [s for s in m.segments if s.end_offset < 1000]
    assert below

    def trimmed() -> RemoteManifest | None:
        x = manifest_of(store, topic)
        ok = x and x.log_start_offset == 1000 and all(s.end_offset >= 1000 for s in x.segments)
        return x if ok else None

    wait_for(trimmed, 20, "the manifest to start at 1000")
    wait_for(lambda: not any(store.exists(segment_key(m.prefix, s, ".arrow")) for s in below), 20,
             "the objects of segments below the log start deleted after the grace period")

    # retention.ms: remote segments expire, the log start moves past them
    alter = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([alter]).values():
        f.result(timeout=30)
    wait_for(lambda: low_watermark(b.bootstrap, topic) > 2000, 30, "retention to move the log start")

    # topic deletion: the topic's directory leaves the store after the grace period
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result(timeout=30)
    wait_for(lambda: not topic_dirs(store, topic), 30, "the deleted topic's objects collected")


def test_a_stalled_store_delays_copies_and_loses_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto's server is stopped (SIGSTOP) while segments wait to be copied: requests that meet it
    time out (1 s) and are retried, unfinished copies are cleaned up, and once the store answers
    again every acknowledged record is held once by the store plus the broker's disk."""
    from pylog.testing_s3 import S3TestServer

    with S3TestServer() as s3:
        for k, v in s3.env.items():  # credentials by the usual AWS names
            monkeypatch.setenv(k, v)
        uri = s3.uri("tier")
        b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config=tier_config(uri, **{
            "remote.log.storage.s3.endpoint": s3.endpoint_url, "remote.log.storage.s3.region": "us-east-1",
            "remote.log.storage.s3.request.timeout.ms": "1000"}))
        used_brokers(request.node).append(b)
        b.start()
        try:
            topic = f"tiered-{uuid.uuid4().hex[:8]}"
            create_topic(b.bootstrap, topic)
            assert produce(b.bootstrap, topic, 1500) == 1500
            s3.pause()
            try:
                # the produce path never waits for the store
                assert produce(b.bootstrap, topic, 1500, 1500) == 1500
                time.sleep(4)
            finally:
                s3.resume()
            store = open_remote_store(uri, s3.options)
            part_dir = tmp_path / "data" / f"{topic}-0"

            def settled() -> RemoteManifest | None:
                m = manifest_of(store, topic)
                if m is None or m.end_offset < 2400:
                    return None
                return m if holds_exactly(store, m) else None

            wait_for(settled, 45, "copies to resume once the store answers")
            m, local = both_tiers(store, topic, part_dir)
            assert m is not None
            remote = remote_values(store, m)
            held = {**remote, **local}
            fault_row("store stalled (SIGSTOP)", {o: VALUE + str(o).encode() for o in range(RECORDS)}, held)
            assert sorted(held) == list(range(RECORDS))
        finally:
            b.stop()


# --- a 3-node cluster on an S3-compatible store (moto's server), with crashes ----------------------


def leader_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return int(md.topics[topic].partitions[0].leader)


def produce_tracked(bootstrap: str, topic: str, count: int, start: int) -> dict[int, bytes]:
    """Produce ``count`` records, acks=all, idempotent; the acknowledged ones by offset."""
    acked: dict[int, bytes] = {}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                  "batch.num.messages": 50, "message.timeout.ms": 30000})

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()

    for i in range(start, start + count):
        p.produce(topic, value=VALUE + str(i).encode(), on_delivery=done)
        p.poll(0)
    p.flush(40)
    return acked


def remote_values(store: RemoteStore, manifest: RemoteManifest) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for seg in manifest.segments:
        data = store.read_bytes(segment_key(manifest.prefix, seg, ".arrow"))
        table = ipc.open_file(pa.py_buffer(data)).read_all()
        for o, v in zip(table.column("offset").to_pylist(), table.column("value").to_pylist(), strict=True):
            if seg.base_offset <= o <= seg.end_offset:
                assert o not in out, f"offset {o} is in two remote segments"
                out[o] = v
    return out


def remote_states(node_dir: Path) -> dict[str, int]:
    """The last state of every remote log segment in a node's metadata log (read from its files)."""
    from pylog.cluster.metadata_log import scan_frames
    from pylog.cluster.records import RemoteLogSegmentRecord, decode_records
    from pylog.cluster.voters import is_control

    states: dict[str, int] = {}
    for f in sorted((node_dir / "__cluster_metadata-0").glob("*.log")):
        entries, _, _ = scan_frames(f.read_bytes(), int(f.stem))
        for e in entries:
            if e.data and not is_control(e.data):
                for r in decode_records(e.data):
                    if isinstance(r, RemoteLogSegmentRecord):
                        states[r.segment_id] = r.state
    return states


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fault", ["after-upload", "after-commit", "before-local-delete", "leader-kill"])
def test_cluster_crashes_lose_nothing_and_leave_nothing_dangling(
    fault: str, cluster_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pylog.testing_s3 import S3TestServer

    with S3TestServer() as s3:
        for k, v in s3.env.items():
            monkeypatch.setenv(k, v)
        marker = tmp_path / "crashed"
        if fault != "leader-kill":
            monkeypatch.setenv("PYLOG_TEST_REMOTE_CRASH_AT", f"{fault}:{marker}")
        uri = s3.uri("tier")
        cluster = cluster_factory(3, config=tier_config(uri, **{
            "remote.log.storage.s3.endpoint": s3.endpoint_url, "remote.log.storage.s3.region": "us-east-1",
            "remote.log.storage.s3.request.timeout.ms": "1000"}))
        bootstrap = cluster.bootstrap_servers
        topic = f"tiered-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, rf=3, **{"min.insync.replicas": "2"})
        store = open_remote_store(uri, s3.options)
        acked = produce_tracked(bootstrap, topic, 2000, 0)
        first_leader = leader_of(bootstrap, topic)
        if fault == "leader-kill":
            wait_for(lambda: (m := manifest_of(store, topic)) and m.segments, 30, "a first copy")
            cluster.kill(first_leader)  # uploads of later segments are under way or due
        else:
            wait_for(marker.exists, 40, f"a broker crashing at {fault}")
            # the marker is written just before the broker kills itself: wait for the exit
            wait_for(lambda: any(not cluster.node(n).running for n in (1, 2, 3)), 10,
                     "the crashed broker to exit")
        dead = [n for n in (1, 2, 3) if not cluster.node(n).running]
        assert dead, "a broker was killed"
        acked.update(produce_tracked(bootstrap, topic, 1000, 2000))
        for n in dead:
            cluster.start_node(n)
        total = len(acked)
        assert total >= 2000

        def settled() -> RemoteManifest | None:
            m = manifest_of(store, topic)
            if m is None or m.end_offset < total - 600:  # all but the last ~2 segments are remote
                return None
            return m if holds_exactly(store, m) else None  # unfinished copies and orphans are gone

        wait_for(settled, 50, "the store to hold exactly the committed segments")
        leader = leader_of(bootstrap, topic)
        m, local = both_tiers(store, topic, cluster.node(leader).data_dir / f"{topic}-0")
        assert m is not None
        remote = remote_values(store, m)
        assert min(local) <= m.end_offset + 1, "no gap between the store and the leader's disk"
        held = {**remote, **local}
        scenario = "kill -9 of the leader during uploads" if fault == "leader-kill" else f"kill -9 at {fault}"
        fault_row(scenario, acked, held)
        missing = [o for o in acked if o not in held]
        assert not missing, f"acknowledged offsets missing: {missing[:10]}"
        assert all(held[o] == v for o, v in acked.items()), "every acknowledged record as written"
        assert sorted(held) == list(range(len(held))), "offsets from 0 without a gap"
        # no dangling metadata: every segment is committed (and in the manifest) or fully deleted
        def clean() -> dict[str, int] | None:
            states = remote_states(cluster.node(leader).data_dir)
            live = {sid for sid, st in states.items() if st != 3}
            ok = live == {seg.segment_id for seg in (manifest_of(store, topic) or m).segments}
            return states if ok and all(st in (1, 3) for st in states.values()) else None

        states = wait_for(clean, 20, "no remote segment left half copied or half deleted")
        if fault in ("after-upload", "leader-kill"):
            assert 3 in states.values() or fault == "leader-kill", "the unfinished copy was deleted"


@pytest.mark.timeout(120)
def test_a_replica_that_lost_its_disk_fetches_only_the_local_part(
    cluster_factory: Any, tmp_path: Path
) -> None:
    import shutil

    remote = tmp_path / "remote"
    cluster = cluster_factory(3, config=tier_config(f"file://{remote}"))
    bootstrap = cluster.bootstrap_servers
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, rf=3, **{"min.insync.replicas": "2"})
    acked = produce_tracked(bootstrap, topic, RECORDS, 0)
    assert len(acked) == RECORDS
    leader = leader_of(bootstrap, topic)
    leader_dir = cluster.node(leader).data_dir / f"{topic}-0"
    wait_for(lambda: min(local_values(leader_dir)) > 1000, 40, "the leader to drop local segments")
    follower = next(n for n in (1, 2, 3) if n != leader)
    cluster.stop_node(follower)
    shutil.rmtree(cluster.node(follower).data_dir / f"{topic}-0")
    cluster.start_node(follower)
    follower_dir = cluster.node(follower).data_dir / f"{topic}-0"

    def caught_up() -> dict[int, bytes] | None:
        if not follower_dir.exists():
            return None
        held = local_values(follower_dir)
        return held if held and max(held) == RECORDS - 1 else None

    held = wait_for(caught_up, 40, "the follower to catch up")
    fault_row("replica lost its disk (local part only)", {o: v for o, v in acked.items() if o >= min(held)},
              held)
    store = open_remote_store(f"file://{remote}")
    m = manifest_of(store, topic)
    assert m is not None and m.segments
    assert min(held) > 0, "the follower did not copy the history the store holds"
    assert min(held) <= m.end_offset + 1, "no gap between the store and the follower's disk"
    assert sorted(held) == list(range(min(held), RECORDS))
    assert all(held[o] == acked[o] for o in held)


@pytest.mark.timeout(120)
def test_a_store_refusing_and_timing_out_a_share_of_requests(
    cluster_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Brokers reach moto through a seeded fault proxy answering SlowDown to 15% of requests and
    stalling 5% past the request timeout while records are produced and a leader is killed; the
    store ends holding exactly the committed segments and every acknowledged record is held once."""
    import random

    from pylog.testing_s3 import S3FaultProxy, S3TestServer

    seed = random.Random().randrange(1 << 16)
    with S3TestServer() as s3, S3FaultProxy(s3.endpoint_url, seed=seed, refuse=0.15, delay=0.05,
                                            delay_s=2.5) as proxy:
        for k, v in s3.env.items():
            monkeypatch.setenv(k, v)
        uri = s3.uri("tier")
        cluster = cluster_factory(3, config=tier_config(uri, **{
            "remote.log.storage.s3.endpoint": proxy.endpoint_url, "remote.log.storage.s3.region": "us-east-1",
            "remote.log.storage.s3.request.timeout.ms": "1000"}))
        bootstrap = cluster.bootstrap_servers
        topic = f"tiered-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, rf=3, **{"min.insync.replicas": "2"})
        acked = produce_tracked(bootstrap, topic, 1500, 0)
        cluster.kill(leader_of(bootstrap, topic))
        acked.update(produce_tracked(bootstrap, topic, 1500, 1500))
        for n in (1, 2, 3):
            cluster.start_node(n)
        proxy.set_faults()  # the weather clears; what was left half done must be finished or undone
        store = open_remote_store(uri, s3.options)

        def settled() -> RemoteManifest | None:
            m = manifest_of(store, topic)
            if m is None or m.end_offset < len(acked) - 600:
                return None
            return m if holds_exactly(store, m) else None

        wait_for(settled, 60, f"the store to hold exactly the committed segments (seed {seed})")
        assert proxy.counts["refused"] > 0, f"faults were injected (seed {seed}): {proxy.counts}"
        leader = leader_of(bootstrap, topic)
        m, local = both_tiers(store, topic, cluster.node(leader).data_dir / f"{topic}-0")
        assert m is not None
        held = {**remote_values(store, m), **local}
        fault_row(f"store refuses 15% / stalls 5% + leader kill (seed {seed})", acked, held)
        lost = [o for o, v in acked.items() if held.get(o) != v]
        assert not lost, f"acknowledged records missing (seed {seed}): {lost[:10]}"
        assert sorted(held) == list(range(len(held)))
