"""A broker writing format 2 segments (`pylog.segment.format=2`, one copy of every record): what
every client produces, with every codec and in transactions, comes back through Kafka fetches,
the SDK over the data directory and over Kafka; no `.wire` files; the disk holds about the bytes
producers sent; a kill -9 while producing loses no acknowledged record; followers write format 2."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from pylog.protocol.records import decode_batch, encode_batch
from pylog.storage import RECORD_SCHEMA, LogConfig

import pylog
from pylog.broker.datapath.batch_bytes import encode_stored
from pylog.onecopy_kafka import rows_from_kafka
from pylog.sdk import read_topic

FORMAT2 = {"pylog.segment.format": "2"}
FORMAT1 = {"pylog.segment.format": "1"}  # pinned where a test writes format 1 data to upgrade
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    data = tmp_path_factory.mktemp("format2") / "data"
    b = pylog.LocalBroker(data, config={**FORMAT2, "log.segment.bytes": "262144"})
    b.start()
    yield b
    b.close()


def create(bootstrap: str, topic: str, partitions: int = 1, rf: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(60)


def consume(bootstrap: str, topic: str, n: int, *, isolation: str = "read_uncommitted",
            partitions: int = 1) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    """(partition, offset, key, value, headers) of the first `n` records, in offset order."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + 60
    try:
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    return sorted(out, key=lambda r: (r[0], r[1]))


def segment_formats(partition_dir: Path, *, sealed_only: bool = False) -> set[str]:
    """The `pylog.format` each data file's schema names ("1" when it names none)."""
    out = set()
    for f in partition_dir.iterdir():
        if f.suffix == ".arrow":
            schema = pa.ipc.open_file(f).schema
        elif f.suffix == ".arrows" and f.stat().st_size and not sealed_only:
            schema = pa.ipc.open_stream(f).schema
        else:
            continue
        out.add((schema.metadata or {}).get(b"pylog.format", b"1").decode())
    return out


def records(codec: str, n: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(b"k-%s-%d" % (codec.encode(), i), (b"%s value %d " % (codec.encode(), i)) * (1 + i % 40),
             [("h", b"%d" % i)]) for i in range(n)]


def test_every_codec_from_every_client_reads_back_everywhere(broker: pylog.LocalBroker) -> None:
    bs = broker.bootstrap_servers
    create(bs, "codecs")
    sent = []
    for codec in ("lz4", "zstd", "gzip", "snappy", "none"):
        p = Producer({"bootstrap.servers": bs, "compression.type": codec, "linger.ms": 20, "acks": "all"})
        for k, v, h in records(codec, 500):
            p.produce("codecs", key=k, value=v, headers=h)
        assert p.flush(30) == 0
        sent += records(codec, 500)
    for codec in ("lz4", "gzip", None):
        kp = KafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=20, acks="all")
        for k, v, h in records(f"kp-{codec}", 300):
            kp.send("codecs", key=k, value=v, headers=h)
        kp.flush(30)
        kp.close()
        sent += records(f"kp-{codec}", 300)
    got = consume(bs, "codecs", len(sent))
    assert [r[1] for r in got] == list(range(len(sent)))
    assert [(r[2], r[3], r[4]) for r in got] == [(k, v, h) for k, v, h in sent]

    for table in (read_topic("codecs", data_dir=broker.data_dir, include_headers=True),
                  read_topic("codecs", bootstrap_servers=bs, include_headers=True)):
        assert table["offset"].to_pylist() == list(range(len(sent)))
        assert table["key"].to_pylist() == [k for k, _, _ in sent]
        assert table["value"].to_pylist() == [v for _, v, _ in sent]
        headers = [[{"key": "h", "value": h[0][1]}] for _, _, h in sent]
        assert table["headers"].to_pylist() == headers

    part = broker.data_dir / "codecs-0"
    assert not list(part.glob("*.wire"))
    assert segment_formats(part) == {"2"}


def test_disk_bytes_about_the_producers_bytes(broker: pylog.LocalBroker) -> None:
    """Uncompressed 1 KB records: the partition directory holds about the bytes sent (format 1
    kept an Arrow copy and a `.wire` copy, about twice)."""
    bs = broker.bootstrap_servers
    create(bs, "size")
    value = os.urandom(1024)
    p = Producer({"bootstrap.servers": bs, "compression.type": "none", "linger.ms": 50,
                  "batch.size": 1 << 20})
    n = 3000
    for i in range(n):
        p.produce("size", key=b"%08d" % i, value=value)
    assert p.flush(30) == 0
    assert len(consume(bs, "size", n)) == n
    produced = n * (8 + 1024)
    part = broker.data_dir / "size-0"
    disk = sum(f.stat().st_size for f in part.iterdir() if f.is_file())
    assert not list(part.glob("*.wire"))
    assert disk <= 1.1 * produced, f"{disk} bytes on disk for {produced} produced ({disk / produced:.3f}x)"


def test_transactions_commit_and_abort(broker: pylog.LocalBroker) -> None:
    bs = broker.bootstrap_servers
    create(bs, "txn", partitions=2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": uuid.uuid4().hex, "compression.type": "lz4"})
    p.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        p.begin_transaction()
        for i in range(50):
            p.produce("txn", key=b"%s-%d" % (outcome.encode(), i), value=b"v%d" % i, partition=i % 2)
        p.flush(30)
        (p.commit_transaction if outcome == "commit" else p.abort_transaction)(30)
    committed = consume(bs, "txn", 100, isolation="read_committed")
    assert len(committed) == 100 and all(r[2].startswith(b"commit-") for r in committed)
    everything = consume(bs, "txn", 150)  # markers take offsets; the aborted records are there
    assert sorted(r[2] for r in everything) == sorted(
        b"%s-%d" % (o.encode(), i) for o in ("commit", "abort", "commit") for i in range(50))
    table = read_topic("txn", data_dir=broker.data_dir)
    assert table.num_rows == 100  # the SDK reads committed records only
    for partition in (0, 1):
        assert segment_formats(broker.data_dir / f"txn-{partition}") == {"2"}


def test_kill_9_while_producing_loses_no_acknowledged_record(tmp_path: Path) -> None:
    b = pylog.LocalBroker(tmp_path / "data", config={**FORMAT2, "log.segment.bytes": "65536"})
    b.start()
    try:
        bs = b.bootstrap_servers
        create(bs, "crash")
        acked: list[bytes] = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2, "compression.type": "lz4",
                          "message.timeout.ms": 5000, "retries": 0})

            def done(err: object, msg: object) -> None:
                if err is None:
                    acked.append(msg.value())  # type: ignore[attr-defined]

            i = 0
            while not stop.is_set():
                p.produce("crash", value=b"record %d " % i * 20, on_delivery=done)
                p.poll(0)
                i += 1
                if i % 200 == 0:
                    time.sleep(0.005)
            p.flush(10)

        t = threading.Thread(target=produce)
        t.start()
        deadline = time.monotonic() + 30
        while len(acked) < 3000 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(b.pid or 0, signal.SIGKILL)
        stop.set()
        t.join(30)
        assert len(acked) >= 3000
        b.stop()
        b.start()
        values = set(read_topic("crash", bootstrap_servers=b.bootstrap_servers)["value"].to_pylist())
        assert not set(acked) - values
        assert not list((b.data_dir / "crash-0").glob("*.wire"))
    finally:
        b.close()


def test_followers_write_format_2(tmp_path: Path) -> None:
    config = {**FORMAT2, "log.segment.bytes": "65536"}
    with pylog.LocalCluster(3, data_dir=tmp_path / "c", config=config) as cluster:
        bs = cluster.bootstrap_servers
        create(bs, "replicated", rf=3, **{"min.insync.replicas": "3"})
        p = Producer({"bootstrap.servers": bs, "acks": "all", "compression.type": "zstd", "linger.ms": 10})
        n = 2000
        for i in range(n):
            p.produce("replicated", key=b"%d" % i, value=b"replicated %d " % i * 10)
        assert p.flush(60) == 0
        assert [r[2] for r in consume(bs, "replicated", n)] == [b"%d" % i for i in range(n)]
        for node in (1, 2, 3):
            part = cluster.node(node).data_dir / "replicated-0"
            assert segment_formats(part) == {"2"}, node
            assert not list(part.glob("*.wire"))
            table = pylog.storage.PartitionLog.open_readonly(part).read_table()
            assert table.num_rows == n and table["key"].to_pylist()[-1] == b"%d" % (n - 1)


class Crash(Exception):
    """A kill -9 between two file-system steps of a segment swap."""


class CrashAfter:
    """``os`` for storage.rewrite that dies at its ``steps``-th rename or unlink."""

    def __init__(self, steps: int) -> None:
        self.left = steps

    def _step(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            if self.left == 0:
                raise Crash
            self.left -= 1
            return fn(*args, **kwargs)
        return step

    def __getattr__(self, name: str) -> Any:
        fn = getattr(os, name)
        return self._step(fn) if name in ("replace", "unlink") else fn


def format_1_log(path: Path) -> tuple[pylog.storage.PartitionLog, list[bytes]]:
    """A format 1 log of several sealed segments (with `.wire` files) and the batches it serves."""
    log = pylog.storage.PartitionLog.open(path, LogConfig(segment_bytes=20_000, segment_format=1), now_ms=0)
    attach(log)
    for i in range(40):
        rb = pa.record_batch([pa.array([b"k%d" % (i % 7)] * 10), pa.array([b"value %d " % i * 30] * 10)],
                             ["key", "value"])
        batch = encode_batch(pa.record_batch({
            "offset": pa.array(range(10), pa.int64()),
            "timestamp": pa.array([1_700_000_000_000 + i] * 10, pa.timestamp("ms", tz="UTC")),
            "key": rb["key"], "value": rb["value"],
            "headers": pa.array([[]] * 10, RECORD_SCHEMA.field("headers").type),
        }, schema=RECORD_SCHEMA), base_offset=0, compression=("lz4", "gzip", "none", "zstd")[i % 4])
        log.append_rows(rows_from_kafka(batch, base_offset=0, partition_leader_epoch=0), now_ms=0)
    log.roll()
    log.seal_pending()
    assert len(list(path.glob("*.wire"))) >= 3
    return log, wire(log)


def wire(log: pylog.storage.PartitionLog) -> list[bytes]:
    """Every batch as a fetch sends it (stored bytes, or encoded from Arrow as the broker does)."""
    return [bytes(b) if isinstance(b, memoryview) else encode_stored(b.meta, b.records)
            for b in log.read_wire(0, 1 << 30)]


def attach(log: pylog.storage.PartitionLog) -> None:
    """The Kafka codecs a broker's partition gives its log."""
    log.wire_encoder = encode_stored
    log.rows_decoder = lambda b, comp: rows_from_kafka(
        b, base_offset=int.from_bytes(b[:8], "big", signed=True), segment_compression=comp)


def test_format_upgrade_interrupted_at_every_step_leaves_old_or_new_segments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pylog.storage.rewrite as rewrite

    path = tmp_path / "t-0"
    log, served = format_1_log(path)
    table = log.read_table()
    steps = 0
    while True:
        log.config = dataclasses.replace(log.config, segment_format=2)
        monkeypatch.setattr(rewrite, "os", CrashAfter(steps))
        try:
            log.upgrade_format()
            finished = True
        except Crash:
            finished = False
        monkeypatch.undo()
        # the process died here: a new one opens the directory
        log = pylog.storage.PartitionLog.open(path, dataclasses.replace(log.config), now_ms=0)
        attach(log)
        assert log.read_table().equals(table), steps
        again = wire(log)
        assert [decode_batch(b).records for b in again] == [decode_batch(b).records for b in served]
        formats = set(segment_formats(path))
        assert formats <= {"1", "2"}
        if finished:
            break
        steps += 1
    log.upgrade_format()
    assert segment_formats(path, sealed_only=True) == {"2"} and not list(path.glob("*.wire"))
    assert log.read_table().equals(table)
    assert steps > 5  # the swaps were interrupted at many points
    log.close()


def test_a_format_1_data_directory_upgrades_in_the_background(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old = pylog.LocalBroker(data, config={**FORMAT1, "log.segment.bytes": "16384"})
    old.start()
    try:
        create(old.bootstrap_servers, "old")
        p = Producer({"bootstrap.servers": old.bootstrap_servers, "compression.type": "lz4", "linger.ms": 5})
        for i in range(1500):
            p.produce("old", key=b"%d" % i, value=b"written in format 1 %d " % i * 5)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 30
        while not list((data / "old-0").glob("*.wire")) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        old.stop()
    before = read_topic("old", data_dir=data)
    assert segment_formats(data / "old-0") == {"1"}
    new = pylog.LocalBroker(data, config={**FORMAT2, "log.segment.bytes": "16384"})
    new.start()
    try:
        bs = new.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "compression.type": "zstd", "linger.ms": 5})
        for i in range(1500, 2000):
            p.produce("old", key=b"%d" % i, value=b"written in format 2 %d " % i * 5)
        assert p.flush(30) == 0
        part = data / "old-0"
        deadline = time.monotonic() + 60
        while (list(part.glob("*.wire")) or segment_formats(part) != {"2"}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert segment_formats(part) == {"2"} and not list(part.glob("*.wire"))
        got = consume(bs, "old", 2000)
        assert [r[2] for r in got] == [b"%d" % i for i in range(2000)]
        after = read_topic("old", data_dir=data)
        assert after.slice(0, before.num_rows).equals(before)
        assert after.num_rows == 2000
    finally:
        new.close()
