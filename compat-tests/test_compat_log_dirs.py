"""Several log directories on one broker (``log.dirs``, JBOD), seen and changed with kafka-python's
admin client: DescribeLogDirs lists each directory with its partitions' sizes, new partitions spread
over the directories, AlterReplicaLogDirs moves a partition under a producer without losing an
acknowledged record, and a restart finds it in its new directory. Bad directories get Kafka's
errors, bad ``log.dirs`` a plain error at start. (confluent-kafka 2.16's AdminClient has no
log-dir calls.)"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_broker import BrokerProcess, pylog_command
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def jbod(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A broker with two log directories (the first also its data directory)."""
    from compat_broker import used_brokers

    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = BrokerProcess(a, tmp_path / "jbod.log", config={"log.dirs": f"{a},{b}"})
    used_brokers(request.node).append(broker)
    broker.start()
    yield broker
    broker.close()


def _dirs(broker: BrokerProcess) -> tuple[Path, Path]:
    a, b = broker.config["log.dirs"].split(",")
    return Path(a).resolve(), Path(b).resolve()


def _admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)


def _placement(admin: KafkaAdminClient, topic: str) -> dict[int, tuple[str, dict[str, Any]]]:
    """partition -> (log dir, its entry) of the current (not future) replicas of ``topic``."""
    out: dict[int, tuple[str, dict[str, Any]]] = {}
    for broker in admin.describe_log_dirs():
        for result in broker["log_dirs"]:
            assert result["error_code"] == 0, result
            for t in result["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        if not p["is_future_key"]:
                            assert p["partition_index"] not in out, "listed in two dirs"
                            out[p["partition_index"]] = (result["log_dir"], p)
    return out


def _node_id(admin: KafkaAdminClient) -> int:
    broker = admin.describe_cluster()["brokers"][0]
    return int(broker.get("node_id", broker.get("broker_id", -1)))


def test_describe_log_dirs_lists_both_dirs_and_new_partitions_spread_over_them(jbod: BrokerProcess) -> None:
    a, b = _dirs(jbod)
    admin = _admin(jbod)
    try:
        admin.create_topics([NewTopic("spread", 6, 1)])
        producer = KafkaProducer(bootstrap_servers=jbod.bootstrap, acks="all")
        for i in range(600):
            producer.send("spread", value=b"v%05d" % i, partition=i % 6)
        producer.flush()
        producer.close()
        described = admin.describe_log_dirs()
        assert len(described) == 1
        dirs = {r["log_dir"]: r for r in described[0]["log_dirs"]}
        assert set(dirs) == {str(a), str(b)}
        for r in dirs.values():
            assert r["total_bytes"] > 0 and 0 <= r["usable_bytes"] <= r["total_bytes"]
        placed = _placement(admin, "spread")
        assert sorted(placed) == list(range(6))
        per_dir = {d: sum(1 for x, _ in placed.values() if x == d) for d in (str(a), str(b))}
        assert per_dir == {str(a): 3, str(b): 3}, per_dir
        for _, entry in placed.values():
            assert entry["partition_size"] > 0 and entry["offset_lag"] == 0
        for p, (d, _) in placed.items():
            assert (Path(d) / f"spread-{p}").is_dir()
        # a topic filter asks for those partitions only
        only = admin.describe_log_dirs({"spread": [1]})
        listed = [
            (t["name"], p["partition_index"])
            for r in only[0]["log_dirs"] for t in r["topics"] for p in t["partitions"]
        ]
        assert listed == [("spread", 1)]
    finally:
        admin.close()


def test_alter_replica_log_dirs_moves_a_partition_under_a_producer(jbod: BrokerProcess) -> None:
    a, b = _dirs(jbod)
    admin = _admin(jbod)
    topic = "moving"
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"segment.bytes": str(256 * 1024)})])
        node = _node_id(admin)
        producer = KafkaProducer(bootstrap_servers=jbod.bootstrap, acks="all", linger_ms=5)
        payload = b"x" * 400
        for i in range(8000):  # about 3 MB before the move: several segments
            producer.send(topic, key=b"%d" % i, value=payload + b"%08d" % i, partition=0)
        producer.flush()
        acked = list(range(8000))
        src, _ = _placement(admin, topic)[0]
        dest = str(b) if src == str(a) else str(a)

        stop = threading.Event()
        errors: list[BaseException] = []
        lock = threading.Lock()

        def keep_producing() -> None:
            i = 8000
            try:
                while not stop.is_set():
                    futures = [
                        (n, producer.send(topic, key=b"%d" % n, value=payload + b"%08d" % n, partition=0))
                        for n in range(i, i + 50)
                    ]
                    for n, f in futures:
                        f.get(timeout=30)
                        with lock:
                            acked.append(n)
                    i += 50
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=keep_producing, daemon=True)
        worker.start()
        time.sleep(0.5)
        answer = admin.alter_replica_log_dirs({(topic, 0, node): dest})
        assert list(answer.values()) == [NoError], answer
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _placement(admin, topic)[0][0] == dest:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the partition did not reach its new log dir in 60 s")
        time.sleep(0.5)  # the producer keeps going against the moved replica
        stop.set()
        worker.join(60)
        assert not errors, errors
        with lock:
            sent = list(acked)
        assert len(sent) > 8000
        assert (Path(dest) / f"{topic}-0").is_dir() and not (Path(src) / f"{topic}-0").exists()
        assert not list(Path(dest).glob("*-future")) and not list(Path(src).glob("*-delete"))
        assert _read_all(jbod, topic) == sent

        # a restart finds the partition in its new directory, with every record
        jbod.restart()
        admin.close()
        admin = _admin(jbod)
        assert _placement(admin, topic)[0][0] == dest
        assert _read_all(jbod, topic) == sent
        # and it moves back: the same call naming the first directory
        assert list(admin.alter_replica_log_dirs({(topic, 0, node): src}).values()) == [NoError]
        _wait_in(admin, topic, src)
        assert _read_all(jbod, topic) == sent
    finally:
        admin.close()


def _wait_in(admin: KafkaAdminClient, topic: str, log_dir: str) -> None:
    deadline = time.monotonic() + 60
    while _placement(admin, topic)[0][0] != log_dir:
        assert time.monotonic() < deadline, f"{topic}-0 did not reach {log_dir}"
        time.sleep(0.2)


def _read_all(broker: BrokerProcess, topic: str) -> list[int]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out: list[int] = []
    offsets: list[int] = []
    while consumer.position(tp) < end:
        for records in consumer.poll(timeout_ms=2000).values():
            for r in records:
                out.append(int(r.value[-8:]))
                offsets.append(r.offset)
    consumer.close()
    assert offsets == list(range(end))
    return out


def test_bad_log_dirs_and_partitions_get_kafkas_errors(jbod: BrokerProcess, tmp_path: Path) -> None:
    a, _ = _dirs(jbod)
    admin = _admin(jbod)
    try:
        admin.create_topics([NewTopic("stays", 1, 1)])
        node = _node_id(admin)
        answer = admin.alter_replica_log_dirs({
            ("stays", 0, node): str(tmp_path / "not-a-log-dir"),
            ("no-such-topic", 0, node): str(a),
        })
        assert answer == {
            ("stays", 0, node): LogDirNotFoundError,
            ("no-such-topic", 0, node): UnknownTopicOrPartitionError,
        }
        # nothing moved, nothing created
        assert _placement(admin, "stays")[0][0] in {str(d) for d in _dirs(jbod)}
        assert not (tmp_path / "not-a-log-dir").exists()
        assert not [p for d in _dirs(jbod) for p in d.glob("*-future")]
    finally:
        admin.close()


def _start_fails(tmp_path: Path, data_dir: Path, log_dirs: str) -> subprocess.CompletedProcess[str]:
    cmd = [*pylog_command(), "broker", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0",
           "--config", f"log.dirs={log_dirs}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def test_bad_log_dirs_at_start_are_refused_plainly(tmp_path: Path) -> None:
    a = tmp_path / "a"
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    out = _start_fails(tmp_path, a, f"{a},{not_a_dir}")
    assert out.returncode == 2 and f"log directory {not_a_dir} is not a directory" in out.stderr, out
    out = _start_fails(tmp_path, a, f"{a},,{tmp_path / 'b'}")
    assert out.returncode == 2 and "has an empty entry" in out.stderr, out
    out = _start_fails(tmp_path, a, f"{tmp_path / 'b'},{tmp_path / 'b'}")
    assert out.returncode == 2 and "names" in out.stderr and "twice" in out.stderr, out
    assert "listening" not in out.stdout


def test_a_partition_found_in_two_log_dirs_stops_the_start(jbod: BrokerProcess) -> None:
    a, b = _dirs(jbod)
    admin = _admin(jbod)
    try:
        admin.create_topics([NewTopic("twice", 1, 1)])
        _placement(admin, "twice")
    finally:
        admin.close()
    jbod.stop()
    here = a if (a / "twice-0").is_dir() else b
    there = b if here == a else a
    shutil.copytree(here / "twice-0", there / "twice-0")
    out = subprocess.run(jbod.command(0), capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2, out
    assert f"partition twice-0 is in two log directories, {a / 'twice-0'} and {b / 'twice-0'}" in out.stderr
    assert "listening" not in out.stdout


def test_pylog_cli_and_sdk_show_and_move_log_dirs(jbod: BrokerProcess) -> None:
    import json

    from pylog.sdk.cluster_admin import ClusterAdminSync

    a, b = _dirs(jbod)
    admin = _admin(jbod)
    try:
        admin.create_topics([NewTopic("shown", 2, 1)])
        node = _node_id(admin)
    finally:
        admin.close()
    with ClusterAdminSync(jbod.bootstrap) as sdk:
        before = {d.path: d for d in sdk.describe_log_dirs(topics=["shown"])}
        assert set(before) == {str(a), str(b)}
        where = {tp: path for path, d in before.items() for tp in d.partitions}
        assert set(where) == {("shown", 0), ("shown", 1)} and len(set(where.values())) == 2
        assert sdk.alter_replica_log_dirs({("shown", 0, node): str(b), ("shown", 1, node): str(b)}) == {
            ("shown", 0, node): 0, ("shown", 1, node): 0}
        deadline = time.monotonic() + 30
        while True:
            now = {d.path: d for d in sdk.describe_log_dirs(topics=["shown"])}
            if set(now[str(b)].partitions) == {("shown", 0), ("shown", 1)} and not now[str(b)].future:
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.2)
    out = subprocess.run([*pylog_command(), "cluster", "log-dirs", "-b", jbod.bootstrap, "--topic", "shown",
                          "--format", "json"], capture_output=True, text=True, timeout=60, check=True)
    shown = {d["log_dir"]: d for d in json.loads(out.stdout)}
    assert [p["partition"] for p in shown[str(b)]["partitions"]] == [0, 1]
    assert shown[str(a)]["partitions"] == [] and shown[str(a)]["usable_bytes"] > 0
    table = subprocess.run([*pylog_command(), "cluster", "log-dirs", "-b", jbod.bootstrap],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    assert table.splitlines()[0].split()[:3] == ["BROKER", "LOG-DIR", "PARTITIONS"]
    assert str(b) in table and str(a) in table


def test_kill_9_during_a_move_leaves_one_whole_copy(jbod: BrokerProcess) -> None:
    """The broker is killed at several points of a move (seeded delays, printed); each restart finds
    the partition in exactly one directory, no future or deleted copy left, every acknowledged
    record there, and the partition movable again."""
    import random

    seed = int(time.time())
    rng = random.Random(seed)
    print(f"kill -9 delays seed: {seed}")
    a, b = _dirs(jbod)
    topic = "crashing"
    admin = _admin(jbod)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"segment.bytes": str(1 << 20)})])
    node = _node_id(admin)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=jbod.bootstrap, acks="all", linger_ms=5)
    payload = b"y" * 400
    futures = [producer.send(topic, value=payload + b"%08d" % n, partition=0) for n in range(30000)]
    producer.flush()
    assert all(f.get(10) for f in futures)
    producer.close()
    sent = list(range(30000))
    outcomes = []
    for delay in [0.0, *sorted(rng.uniform(0.01, 0.6) for _ in range(3))]:
        admin = _admin(jbod)
        src = _placement(admin, topic)[0][0]
        dest = str(b) if src == str(a) else str(a)
        assert list(admin.alter_replica_log_dirs({(topic, 0, node): dest}).values()) == [NoError]
        admin.close()
        time.sleep(delay)
        jbod.restart(hard=True)
        found = [d for d in (a, b) if (d / f"{topic}-0").is_dir()]
        assert len(found) == 1, found
        leftovers = [p.name for d in (a, b) for p in d.iterdir() if p.name.endswith(("-future", "-delete"))]
        assert not leftovers, leftovers
        outcomes.append((round(delay, 3), "moved" if str(found[0]) == dest else "stayed"))
        assert _read_all(jbod, topic) == sent
    print(f"kill -9 at (delay s, outcome): {outcomes}")
    admin = _admin(jbod)
    try:  # still movable
        src = _placement(admin, topic)[0][0]
        dest = str(b) if src == str(a) else str(a)
        assert list(admin.alter_replica_log_dirs({(topic, 0, node): dest}).values()) == [NoError]
        _wait_in(admin, topic, dest)
    finally:
        admin.close()
    assert _read_all(jbod, topic) == sent
