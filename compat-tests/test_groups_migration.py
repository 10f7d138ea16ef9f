"""Both consumer protocols in one group, with real clients against a real broker:

* a confluent-kafka consumer with `group.protocol=consumer` (KIP-848) joins a live classic group
  (a kafka-python consumer and a classic confluent-kafka consumer) without an error, takes its share
  of the partitions, leaves, and the group goes back to classic; every record is consumed once;
* a regex resubscription under KIP-848 is assigned only the new subscription's partitions, the
  literal topics first and the regex's later (librdkafka's 0045 `do_test_resubscribe_with_regex`);
* a KIP-848 member that exceeds `max.poll.interval.ms` keeps its partition until then and gives it
  to the other member when it leaves (librdkafka's 0089 `do_test`).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from compat_broker import BrokerProcess
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka.errors import CommitFailedError

CONFIG = {"group.consumer.heartbeat.interval.ms": "1000", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def mig_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("migration")
    b = BrokerProcess(tmp / "data", tmp / "broker.log", config=CONFIG)
    b.start()
    yield b
    b.close()


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, values: range, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in values:
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def group_type(bootstrap: str, group: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(30)
    for g in listed.valid:
        if g.group_id == group:
            return str(g.type).split(".")[-1].lower()
    return None


class Tracker:
    """Every value consumed, by whom, and whether its commit succeeded."""

    def __init__(self) -> None:
        self.seen: Counter[int] = Counter()
        self.by: dict[str, set[int]] = {}
        self.uncommitted: set[int] = set()

    def got(self, who: str, value: int, partition: int, committed: bool) -> None:
        self.seen[value] += 1
        self.by.setdefault(who, set()).add(partition)
        if not committed:
            self.uncommitted.add(value)


def poll_confluent(c: Consumer, who: str, t: Tracker) -> None:
    msg = c.poll(0.05)
    if msg is None:
        return
    if msg.error() is not None:
        assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
        return
    try:
        c.commit(msg, asynchronous=False)
        ok = True
    except Exception:
        ok = False  # e.g. a rebalance in between: the record may come again
    t.got(who, int(msg.value()), msg.partition(), ok)


def poll_kafka_python(c: KafkaConsumer, who: str, t: Tracker) -> None:
    batches = c.poll(timeout_ms=50, max_records=20)
    for tp, records in batches.items():
        for r in records:
            from kafka import OffsetAndMetadata

            try:
                c.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                ok = True
            except CommitFailedError:
                ok = False
            t.got(who, int(r.value), tp.partition, ok)


def drain(pollers: list, t: Tracker, want: int, deadline_s: float = 90.0) -> None:
    end = time.monotonic() + deadline_s
    while len(t.seen) < want and time.monotonic() < end:
        for poll in pollers:
            poll()


def test_consumer_protocol_member_joins_a_live_classic_group_and_back(
    mig_broker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = mig_broker.bootstrap
    n = 6
    create_topics(bootstrap, {topic_name: n})
    group = f"mig-{topic_name}"
    t = Tracker()
    classic = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 1000,
            "session.timeout.ms": 10000,
        }
    )
    kp = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=1000,
        session_timeout_ms=10000,
    )
    classic.subscribe([topic_name])
    kp.subscribe([topic_name])
    pollers = [
        lambda: poll_confluent(classic, "classic", t),
        lambda: poll_kafka_python(kp, "kafka-python", t),
    ]
    try:
        produce(bootstrap, topic_name, range(0, 300), n)
        drain(pollers, t, 300)
        assert len(t.seen) == 300, f"phase 1: {len(t.seen)} of 300"
        assert group_type(bootstrap, group) == "classic"

        modern = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        modern.subscribe([topic_name])
        errors: list = []

        def poll_modern() -> None:
            msg = modern.poll(0.05)
            if (
                msg is not None
                and msg.error() is not None
                and msg.error().code() != KafkaError._PARTITION_EOF
            ):
                errors.append(msg.error())
            elif msg is not None and msg.error() is None:
                try:
                    modern.commit(msg, asynchronous=False)
                    ok = True
                except Exception:
                    ok = False
                t.got("consumer-protocol", int(msg.value()), msg.partition(), ok)

        all_pollers = [*pollers, poll_modern]
        end = time.monotonic() + 60
        while group_type(bootstrap, group) != "consumer" and time.monotonic() < end:
            for _ in range(20):
                for poll in all_pollers:
                    poll()
        assert group_type(bootstrap, group) == "consumer"
        # keep producing until the new member has a share of the partitions
        produced = 300
        end = time.monotonic() + 90
        while not t.by.get("consumer-protocol") and time.monotonic() < end:
            produce(bootstrap, topic_name, range(produced, produced + 60), n)
            produced += 60
            drain(all_pollers, t, produced, deadline_s=5)
        drain(all_pollers, t, produced)
        assert errors == [], errors
        assert t.by.get("consumer-protocol"), "the consumer-protocol member got no partition"
        assert len(t.seen) == produced

        modern.close()  # the last consumer-protocol member leaves: back to a classic group
        produce(bootstrap, topic_name, range(produced, produced + 300), n)
        produced += 300
        drain(pollers, t, produced)
        assert len(t.seen) == produced, f"after the downgrade: {len(t.seen)} of {produced}"
        end = time.monotonic() + 30
        while group_type(bootstrap, group) != "classic" and time.monotonic() < end:
            for poll in pollers:
                poll()
        assert group_type(bootstrap, group) == "classic"
    finally:
        classic.close()
        kp.close()
    dupes = {v: k for v, k in t.seen.items() if k > 1}
    assert set(dupes) <= t.uncommitted, f"consumed twice after a successful commit: {sorted(dupes)[:20]}"
    assert set(t.seen) == set(range(produced))


def _await_assignment(c: Consumer, events: list, timeout_s: float = 30.0) -> list:
    end = time.monotonic() + timeout_s
    while not events and time.monotonic() < end:
        c.poll(0.1)
    assert events, "timed out waiting for a rebalance event"
    return events.pop(0)


def test_regex_resubscription_assigns_only_the_new_topics(mig_broker: BrokerProcess, topic_name: str) -> None:
    """librdkafka's 0045 do_test_resubscribe_with_regex with group.protocol=consumer."""
    bootstrap = mig_broker.bootstrap
    base = topic_name.replace("-", "_")
    t1, t2, ta = f"{base}_topic_regex1", f"{base}_topic_regex2", f"{base}_topic_a"
    create_topics(bootstrap, {t1: 4, t2: 4, ta: 2})
    events: list = []

    def on_assign(_c: Consumer, parts: list) -> None:
        events.append(("assign", sorted((p.topic, p.partition) for p in parts)))

    def on_revoke(_c: Consumer, parts: list) -> None:
        events.append(("revoke", sorted((p.topic, p.partition) for p in parts)))

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rx-{base}", "group.protocol": "consumer"})
    regex = f"^{re.escape(base)}_topic_regex.*"

    def expect_assign(*topics: tuple[str, int]) -> None:
        kind, parts = _await_assignment(c, events)
        assert kind == "assign", (kind, parts)
        want = sorted((name, p) for name, n in topics for p in range(n))
        assert parts == want, f"expected assignment of {len(want)} partitions, got {len(parts)}: {parts}"

    def expect_revoke() -> None:
        kind, parts = _await_assignment(c, events)
        assert kind == "revoke", (kind, parts)

    try:
        c.subscribe([t1], on_assign=on_assign, on_revoke=on_revoke)
        expect_assign((t1, 4))
        c.unsubscribe()
        expect_revoke()
        c.subscribe([t2], on_assign=on_assign, on_revoke=on_revoke)
        expect_assign((t2, 4))
        c.unsubscribe()
        expect_revoke()
        c.subscribe([regex], on_assign=on_assign, on_revoke=on_revoke)
        expect_assign((t1, 4), (t2, 4))
        c.unsubscribe()
        expect_revoke()
        c.subscribe([regex, ta], on_assign=on_assign, on_revoke=on_revoke)
        expect_assign((ta, 2))  # the literal topic in one heartbeat ...
        expect_assign((t1, 4), (t2, 4))  # ... the regex's topics in a later one
        assert sorted((p.topic, p.partition) for p in c.assignment()) == sorted(
            [(ta, 0), (ta, 1)] + [(t, p) for t in (t1, t2) for p in range(4)]
        )
        c.unsubscribe()
        expect_revoke()
    finally:
        c.close()


def test_max_poll_interval_exceeded_moves_the_partition_only_after_the_member_leaves(
    mig_broker: BrokerProcess, topic_name: str
) -> None:
    """librdkafka's 0089 do_test with group.protocol=consumer: the member that stops polling keeps
    its partition for max.poll.interval.ms, then leaves; the other member gets the partition and
    the one that exceeded the interval rejoins without taking it back."""
    bootstrap = mig_broker.bootstrap
    create_topics(bootstrap, {topic_name: 1})
    produce(bootstrap, topic_name, range(10), 1)
    max_poll_ms = 6000
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"mp-{topic_name}",
        "group.protocol": "consumer",
        "max.poll.interval.ms": max_poll_ms,
        "auto.offset.reset": "earliest",
    }
    cs = [Consumer(dict(conf)), Consumer(dict(conf))]
    for c in cs:
        c.subscribe([topic_name])
    try:
        bad, first_at = -1, 0.0
        end = time.monotonic() + 60
        while bad < 0 and time.monotonic() < end:
            for i, c in enumerate(cs):
                msg = c.poll(0.1)
                if msg is not None and msg.error() is None:
                    bad, first_at = i, time.monotonic()
                    break
        assert bad >= 0, "no member received a record"
        good = cs[bad ^ 1]
        # the bad member "processes" for twice max.poll.interval.ms; the good one keeps polling
        got_at = None
        while time.monotonic() < first_at + 2 * max_poll_ms / 1000:
            msg = good.poll(0.1)
            if msg is not None and msg.error() is None and got_at is None:
                got_at = time.monotonic()
        assert got_at is None or got_at > first_at + max_poll_ms / 1000, (
            f"the partition moved {got_at - first_at:.1f}s after the first record, "
            "before max.poll.interval.ms"
        )
        # the bad member polls again: it learns it exceeded the interval, leaves and rejoins
        saw_max_poll = False
        back_at = time.monotonic()
        while got_at is None and time.monotonic() < back_at + 20:
            msg = cs[bad].poll(0.1)
            if msg is not None and msg.error() is not None:
                saw_max_poll |= msg.error().code() == KafkaError._MAX_POLL_EXCEEDED
            elif msg is not None:
                pytest.fail("the member that exceeded max.poll.interval.ms got its partition back")
            msg = good.poll(0.1)
            if msg is not None and msg.error() is None:
                got_at = time.monotonic()
        assert saw_max_poll, "no _MAX_POLL_EXCEEDED on the member that stopped polling"
        assert got_at is not None, "the other member never got the partition"
        assert got_at < back_at + 10, f"the partition moved {got_at - back_at:.1f}s after the leave"
    finally:
        for c in cs:
            c.close()
