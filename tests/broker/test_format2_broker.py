"""A broker writing format 2 segments (`pylog.segment.format=2`, one copy of every record): what
every client produces, with every codec and in transactions, comes back through Kafka fetches,
the SDK over the data directory and over Kafka; no `.wire` files; the disk holds about the bytes
producers sent; a kill -9 while producing loses no acknowledged record; followers write format 2."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

import pylog
from pylog.sdk import read_topic

FORMAT2 = {"pylog.segment.format": "2"}
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


def segment_formats(partition_dir: Path) -> set[str]:
    """The `pylog.format` each data file's schema names ("1" when it names none)."""
    out = set()
    for f in partition_dir.iterdir():
        if f.suffix == ".arrow":
            schema = pa.ipc.open_file(f).schema
        elif f.suffix == ".arrows" and f.stat().st_size:
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
