"""The remote tier's read side against a real broker process: a confluent-kafka consumer reads from
offset 0 a topic whose first ~90% lives only in the store (Fetch below the local log start served
from the store), ListOffsets answers earliest / earliest-local / latest-tiered and finds timestamps in
remote segments, and the SDK given only bootstrap servers reads the history straight from the store
the broker names and the tail through Kafka."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, used_brokers
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pylog.storage.remote_layout import RemoteManifest, partition_prefix, read_manifest, topic_dirs
from pylog.storage.remote_store import open_remote_store

import pylog
from pylog.sdk.admin import EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED, Admin
from pylog.sdk.remote_source import TieredKafkaSource
from pylog.testing_s3 import S3TestServer

RECORDS = 4000
TS0 = int(time.time() * 1000) - 600_000  # recent: retention.ms must not expire them


def _value(i: int) -> bytes:
    return b"record-%06d-" % i + b"x" * 180


@pytest.fixture(scope="module")
def s3() -> Any:
    with S3TestServer() as server:
        yield server


@pytest.fixture(params=["file", "s3"])
def tiered(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    if request.param == "s3":  # the broker and this client find the credentials in the environment
        server = request.getfixturevalue("s3")
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        uri, options = server.uri(f"reads-{uuid.uuid4().hex[:6]}"), dict(server.options)
        store_config = {"remote.log.storage.uri": uri, "remote.log.storage.s3.endpoint": server.endpoint_url}
    else:
        uri, options = f"file://{tmp_path / 'remote'}", {}
        store_config = {"remote.log.storage.uri": uri}
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config={
        "remote.log.storage.system.enable": "true", **store_config,
        "remote.log.manager.task.interval.ms": "200", "remote.log.reader.grace.ms": "1500"})
    used_brokers(request.node).append(b)
    b.start()
    topic = f"history-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config={
            "remote.storage.enable": "true", "segment.bytes": "65536",
            "local.retention.bytes": "60000"})], operation_timeout=30).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": 40})
    for i in range(RECORDS):
        p.produce(topic, value=_value(i), key=b"k%d" % (i % 7), timestamp=TS0 + i)
        p.poll(0)
    assert p.flush(30) == 0
    store = open_remote_store(uri, options)

    def settled() -> RemoteManifest | None:
        dirs = topic_dirs(store, topic)
        m = read_manifest(store, partition_prefix(topic, next(iter(dirs)), 0)) if dirs else None
        return m if m is not None and m.end_offset >= RECORDS * 0.85 else None

    deadline = time.monotonic() + 45
    while (m := settled()) is None:
        assert time.monotonic() < deadline, "the broker did not copy 85% of the topic to the store"
        time.sleep(0.3)
    # wait until local retention dropped the copied segments
    with Admin(b.bootstrap) as sdk:
        parts = sdk.run(lambda a: a.cluster([topic])).topics[topic]
        while sdk.run(lambda a: a.list_offsets(topic, parts, EARLIEST_LOCAL))[0] < RECORDS * 0.8:
            assert time.monotonic() < deadline, "local segments copied to the store were not deleted"
            time.sleep(0.3)
    yield b, topic, m
    if b.alive():
        b.stop()


def test_consumer_reads_from_offset_zero_through_the_store(tiered: Any) -> None:
    b, topic, manifest = tiered
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 65536})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, RECORDS)  # earliest is the log start over both tiers
        c.assign([TopicPartition(topic, 0, 0)])
        seen: list[int] = []
        deadline = time.monotonic() + 40
        while len(seen) < RECORDS and time.monotonic() < deadline:
            for msg in c.consume(500, timeout=1.0):
                assert msg.error() is None, msg.error()
                assert msg.value() == _value(msg.offset())
                assert msg.timestamp()[1] == TS0 + msg.offset()
                seen.append(msg.offset())
        assert seen == list(range(RECORDS)), "every record once, in order, across the tiers"
        # timestamps held only by the store are found there
        found = c.offsets_for_times([TopicPartition(topic, 0, TS0 + 123)], timeout=10)
        assert found[0].offset == 123
    finally:
        c.close()
    with Admin(b.bootstrap) as sdk:
        parts = sdk.run(lambda a: a.cluster([topic])).topics[topic]
        got = {ts: sdk.run(lambda a, ts=ts: a.list_offsets(topic, parts, ts))[0]
               for ts in (EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, LATEST)}
    assert got[EARLIEST] == 0 and got[LATEST] == RECORDS
    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    tp = TopicPartition(topic, 0)
    for spec, want in ((OffsetSpec.earliest(), 0), (OffsetSpec.max_timestamp(), RECORDS - 1),
                       (OffsetSpec.for_timestamp(TS0 + 77), 77)):
        result = admin.list_offsets({tp: spec})[tp].result(timeout=10)
        assert result.offset == want, (spec, result)
    assert got[EARLIEST_LOCAL] > RECORDS * 0.8
    assert got[LATEST_TIERED] >= manifest.end_offset - 1 and got[LATEST_TIERED] >= got[EARLIEST_LOCAL] - 1


def test_sdk_reads_the_store_the_broker_names(tiered: Any) -> None:
    b, topic, _manifest = tiered
    scan = pylog.scan_topic(topic, bootstrap_servers=b.bootstrap)
    source = scan._source()
    try:
        assert isinstance(source, TieredKafkaSource)  # discovered: remote.log.storage.uri via DescribeConfigs
    finally:
        source.close()
    table = pylog.read_topic(topic, bootstrap_servers=b.bootstrap)
    assert table["offset"].to_pylist() == list(range(RECORDS))
    assert table["value"].to_pylist() == [_value(i) for i in range(RECORDS)]
    tail = pylog.read_topic(topic, bootstrap_servers=b.bootstrap, starting_timestamp=TS0 + 3990)
    assert tail["offset"].to_pylist() == list(range(3990, RECORDS))
    through_kafka = pylog.read_topic(topic, bootstrap_servers=b.bootstrap, remote_storage=False)
    assert through_kafka["offset"].to_pylist() == list(range(RECORDS))


def test_describe_cluster_info_and_the_partitions_widget_show_both_tiers(tiered: Any) -> None:
    import json
    import subprocess
    import sys

    import pylog.widgets as widgets

    b, topic, _manifest = tiered
    pylog_cli = [sys.executable, "-m", "pylog"]
    out = subprocess.run([*pylog_cli, "topic", "describe", topic, "--bootstrap-servers", b.bootstrap,
                          "--format", "json"], capture_output=True, text=True, timeout=60, check=True)
    (p,) = json.loads(out.stdout)[0]["partitions"]
    assert p["log_start_offset"] == 0 and p["high_watermark"] == RECORDS
    assert RECORDS * 0.8 < p["local_log_start_offset"] <= p["remote_end_offset"] <= RECORDS
    assert p["remote_bytes"] > 0 and p["remote_segments"] > 0 and p["local_bytes"] > 0
    assert p["upload_lag"] == RECORDS - p["remote_end_offset"]
    info = subprocess.run([*pylog_cli, "cluster", "info", "--bootstrap-servers", b.bootstrap,
                           "--format", "json"], capture_output=True, text=True, timeout=60, check=True)
    tier = json.loads(info.stdout)["remote_tier"]
    assert tier["tiered_topics"] == 1 and tier["upload_lag"] == p["upload_lag"]
    df = widgets.partitions(topic, bootstrap_servers=b.bootstrap)
    row = df.iloc[0]
    assert row["local_log_start_offset"] == p["local_log_start_offset"]
    assert row["remote_bytes"] == p["remote_bytes"] and row["upload_lag"] == p["upload_lag"]


def test_read_committed_skips_aborted_transactions_held_only_by_the_store(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A read_committed consumer from offset 0 after a restart, most of the transactions (committed
    and aborted) only in the store: every committed record once, no aborted one."""
    remote = tmp_path / "remote"
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config={
        "remote.log.storage.system.enable": "true", "remote.log.storage.uri": f"file://{remote}",
        "remote.log.manager.task.interval.ms": "200"})
    used_brokers(request.node).append(b)
    b.start()
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config={
            "remote.storage.enable": "true", "segment.bytes": "65536",
            "local.retention.bytes": "60000"})], operation_timeout=30).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    committed: list[bytes] = []
    for t in range(60):
        p.begin_transaction()
        values = [b"t%02d-%03d-" % (t, i) + b"z" * 150 for i in range(60)]
        for v in values:
            p.produce(topic, value=v)
        if t % 3 == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += values
    deadline = time.monotonic() + 45
    with Admin(b.bootstrap) as sdk:
        parts = sdk.run(lambda a: a.cluster([topic])).topics[topic]
        while sdk.run(lambda a: a.list_offsets(topic, parts, EARLIEST_LOCAL))[0] < 1200:
            assert time.monotonic() < deadline, "the broker did not tier the topic"
            time.sleep(0.3)
    b.restart()  # the in-memory aborted-transaction index now holds only the local part
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 40
        while len(got) < len(committed) and time.monotonic() < deadline:
            for msg in c.consume(500, timeout=1.0):
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        time.sleep(0.5)
        got += [m.value() for m in c.consume(500, timeout=0.5) if m.error() is None]
        assert got == committed, "read_committed: every committed record once, no aborted one"
    finally:
        c.close()
        b.stop()
