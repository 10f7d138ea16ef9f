"""`pylog.follow` against a real broker process while real clients (confluent-kafka, kafka-python)
produce: batches as records arrive, group offsets committed after each batch, a restarted Python
process resuming from them with nothing skipped, the exactly-once form, transactions, registry
decoding, Ctrl-C, and plain errors for misuse."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from sdk_helpers import running_broker

import pylog
from pylog.sdk import GroupHasMembersError, UnknownTopicError


@pytest.fixture(scope="module")
def broker() -> Iterator[pylog.LocalBroker]:
    yield from running_broker({"num.partitions": 3})


def new_topic(bs: str, partitions: int = 3) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"f-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(bs: str, topic: str, n: int, *, start: int = 0, pause_every: int = 0) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "linger.ms": 2})
    for i in range(start, start + n):
        p.produce(topic, key=f"k{i % 17}".encode(), value=f"v{i}".encode())
        if pause_every and i % pause_every == 0:
            p.flush(10)
            time.sleep(0.05)
    assert p.flush(30) == 0


def end_offsets(bs: str, topic: str, partitions: int = 3) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bs)
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: o for tp, o in ends.items()}
    finally:
        c.close()


def committed(bs: str, group: str, topic: str) -> dict[int, int]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        listed = admin.list_group_offsets({group: None})[group]
        return {tp.partition: om.offset for tp, om in listed.items() if tp.topic == topic}
    finally:
        admin.close()


def test_batches_while_a_producer_writes_and_offsets_committed(broker: pylog.LocalBroker) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(bs)
    writer = threading.Thread(target=produce, args=(bs, topic, 3000), kwargs={"pause_every": 250})
    follower = pylog.follow(topic, group="dash", bootstrap_servers=bs, starting_offsets="earliest",
                            max_records=400, max_wait=0.3, idle_timeout=4)
    want_schema = pylog.read_topic(topic, bootstrap_servers=bs, ending_offsets="earliest").schema
    writer.start()
    seen: list[tuple[int, int, bytes]] = []
    sizes = []
    for batch in follower:
        assert isinstance(batch, pa.RecordBatch)
        assert batch.schema == want_schema  # read_topic's
        assert set(batch["topic"].to_pylist()) == {topic}
        sizes.append(batch.num_rows)
        seen += zip(batch["partition"].to_pylist(), batch["offset"].to_pylist(), batch["value"].to_pylist())
    writer.join()
    assert len(sizes) > 3 and max(sizes) <= 400
    assert sorted(v for _, _, v in seen) == sorted(f"v{i}".encode() for i in range(3000))
    ends = end_offsets(bs, topic)
    for p in range(3):
        assert [o for q, o, _ in seen if q == p] == list(range(ends[p]))  # in order, nothing skipped
    assert committed(bs, "dash", topic) == ends  # the last batch too: the loop asked for more
    assert follower.positions == ends and follower.records == 3000


KERNEL = textwrap.dedent("""
    import sys, pylog
    topic, group, bs, out, idle = sys.argv[1:6]
    with open(out, "a") as f:
        for batch in pylog.follow(topic, group=group, bootstrap_servers=bs, starting_offsets="earliest",
                                  max_records=100, max_wait=0.2, idle_timeout=float(idle)):
            for p, o in zip(batch["partition"].to_pylist(), batch["offset"].to_pylist()):
                f.write(f"{p} {o}\\n")
            f.flush()
    print("done", flush=True)
""")


def test_a_restarted_kernel_resumes_from_the_groups_offsets(broker: pylog.LocalBroker,
                                                            tmp_path: Path) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(bs)
    produce(bs, topic, 2000)
    out = tmp_path / "seen.txt"
    out.touch()
    first = subprocess.Popen([sys.executable, "-c", KERNEL, topic, "nb", bs, str(out), "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(out.read_text().splitlines()) < 700:
        assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
        assert time.monotonic() < deadline, "the first kernel read too little"
        time.sleep(0.01)
    first.kill()  # kill -9 of the kernel, mid-stream
    first.wait(30)
    before = [tuple(map(int, line.split())) for line in out.read_text().splitlines()]
    produce(bs, topic, 1000, start=2000)
    second = subprocess.run([sys.executable, "-c", KERNEL, topic, "nb", bs, str(out), "3"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "done" in second.stdout, second.stderr
    seen = [tuple(map(int, line.split())) for line in out.read_text().splitlines()]
    after = seen[len(before):]
    ends = end_offsets(bs, topic)
    assert set(seen) == {(p, o) for p in range(3) for o in range(ends[p])}  # nothing skipped
    dupes = sum(n - 1 for n in Counter(seen).values())
    assert dupes <= 100  # at least once: at most the batch the first kernel had not finished
    assert len(before) >= 700 and len(after) >= 1000
    assert committed(bs, "nb", topic) == ends


def test_exactly_once_form_returns_offsets_to_store(broker: pylog.LocalBroker) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(bs)
    produce(bs, topic, 900)
    store: dict[str, object] = {"rows": [], "offsets": "earliest"}  # output and offsets, written together
    for _run in range(2):
        follower = pylog.follow(topic, bootstrap_servers=bs, starting_offsets=store["offsets"], commit=False,
                                max_records=200, max_wait=0.2, idle_timeout=2)
        for i, (batch, offsets) in enumerate(follower):
            store = {"rows": [*store["rows"], *batch["value"].to_pylist()], "offsets": offsets}  # type: ignore[misc]
            assert offsets == follower.offsets()
            if _run == 0 and i == 1:
                break  # a crash after storing two batches
        follower.close()
    assert sorted(store["rows"]) == sorted(f"v{i}".encode() for i in range(900))  # type: ignore[arg-type]
    assert committed(bs, "nobody", topic) == {}


def test_aborted_transactions_never_show(broker: pylog.LocalBroker) -> None:
    from confluent_kafka import Producer

    bs = broker.bootstrap_servers
    topic = new_topic(bs, 1)
    follower = pylog.follow(topic, bootstrap_servers=bs, max_wait=0.3, idle_timeout=3)
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for commit in (False, True, False, True):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=f"{'kept' if commit else 'aborted'}-{i}".encode())
        (p.commit_transaction if commit else p.abort_transaction)(30)
    values = [v for batch in follower for v in batch["value"].to_pylist()]
    assert values == [f"kept-{i}".encode() for i in range(5)] * 2


def test_registry_decoding_and_polars_frames(broker: pylog.LocalBroker) -> None:
    bs, registry = broker.bootstrap_servers, broker.schema_registry_url
    assert registry is not None, "the test needs the registry extra"
    topic = new_topic(bs, 1)
    follower = pylog.follow(topic, bootstrap_servers=bs, decode="registry", as_="polars", max_wait=0.3,
                            idle_timeout=3)
    payments = pa.table({"id": [1, 2, 3], "customer": ["ada", "bob", "cy"], "amount": [9.5, 12.25, 1.0]})
    pylog.write_topic(payments, topic, bootstrap_servers=bs, value_schema="registry",
                      schema_registry_url=registry, progress=False)
    frames = list(follower)
    import polars as pl

    assert all(isinstance(f, pl.DataFrame) for f in frames)
    df = pl.concat(frames)
    assert df["value"].struct.field("customer").to_list() == ["ada", "bob", "cy"]


def test_ctrl_c_ends_the_loop_cleanly(broker: pylog.LocalBroker) -> None:
    bs = broker.bootstrap_servers
    topic = new_topic(bs, 1)
    produce(bs, topic, 10)
    code = textwrap.dedent(f"""
        import pylog
        n = 0
        for batch in pylog.follow({topic!r}, group="ctrl-c", bootstrap_servers={bs!r},
                                  starting_offsets="earliest", max_wait=0.2):
            n += batch.num_rows
            print("got", n, flush=True)
        print("stopped cleanly after", n, flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "got 10"
    time.sleep(0.5)  # waiting for records that do not come
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == "stopped cleanly after 10"
    assert committed(bs, "ctrl-c", topic) == {0: 10}


def test_misuse_is_explained(broker: pylog.LocalBroker) -> None:
    from kafka import KafkaConsumer

    bs = broker.bootstrap_servers
    topic = new_topic(bs, 1)
    with pytest.raises(ValueError, match="exactly-once form"):
        pylog.follow(topic, bootstrap_servers=bs, group="g", commit=False)
    with pytest.raises(ValueError, match="max_records"):
        pylog.follow(topic, bootstrap_servers=bs, max_records=0)
    with pytest.raises(ValueError, match="as_"):
        pylog.follow(topic, bootstrap_servers=bs, as_="excel")
    with pytest.raises(ValueError, match="bootstrap_servers"):
        pylog.follow(topic, bootstrap_servers=None)
    with pytest.raises(UnknownTopicError):
        pylog.follow("no-such-topic", bootstrap_servers=bs)
    member = KafkaConsumer(topic, bootstrap_servers=bs, group_id="busy", auto_offset_reset="earliest")
    try:
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(200)
        with pytest.raises(GroupHasMembersError, match="busy"):
            pylog.follow(topic, bootstrap_servers=bs, group="busy")
    finally:
        member.close()
    follower = pylog.follow(topic, bootstrap_servers=bs)
    with pytest.raises(ValueError, match="without group"):
        follower.commit()
    follower.close()
    assert list(follower) == []
