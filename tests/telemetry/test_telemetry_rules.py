"""Client metrics, sans-IO: subscription matching and ids, and the GetTelemetrySubscriptions /
PushTelemetry rules with Kafka's errors (deterministic: time and ids passed in)."""

from __future__ import annotations

import itertools
import uuid

import pytest
from pylog.protocol.errors import ErrorCode
from pylog.protocol.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import ConfigRecord, ConfigResourceType
from pylog.telemetry.manager import ClientMetricsManager
from pylog.telemetry.subscriptions import (
    ALL_METRICS,
    DEFAULT_INTERVAL_MS,
    ClientIdentity,
    assign,
    parse_subscription,
    subscriptions_of,
)

E = ErrorCode
ZERO = uuid.UUID(int=0)
ID = uuid.UUID("6a149088-3d3c-4b26-9617-da7eaf6b6e43")


def who(instance_id: uuid.UUID = ID, **kw: object) -> ClientIdentity:
    fields: dict[str, object] = {
        "client_id": "billing-producer",
        "client_software_name": "confluent-kafka-python",
        "client_software_version": "2.16.1-rdkafka-2.16.0",
        "client_source_address": "10.0.0.7",
        "client_source_port": 51234,
    }
    fields.update(kw)
    return ClientIdentity(instance_id, **fields)  # type: ignore[arg-type]


def sub(name: str, metrics: str = "", interval: str | None = None, match: str = "") -> object:
    configs = {"metrics": metrics, "match": match}
    if interval is not None:
        configs["interval.ms"] = interval
    s = parse_subscription(name, configs)
    assert s is not None
    return s


def test_matching_is_every_selector_on_the_whole_attribute() -> None:
    s = sub(
        "s", "org.apache.kafka.producer.", "1000", "client_id=billing-.*,client_software_name=confluent.*"
    )
    assert s.matches(who())
    assert not s.matches(who(client_id="other"))
    assert not s.matches(who(client_id="xbilling-producer"))  # the regex must match the whole id
    assert not s.matches(who(client_software_name=None))  # an attribute the client did not send
    assert sub("port", match="client_source_port=512.*").matches(who())
    assert sub("everyone").matches(who(client_id=None))


def test_assignment_unions_metrics_at_the_shortest_interval() -> None:
    subs = (
        sub("a", "org.apache.kafka.producer.", "5000", "client_id=billing.*"),
        sub("b", "org.apache.kafka.consumer.fetch", "2000"),
        sub("c", "org.apache.kafka.other", "100", "client_id=nobody"),
    )
    a = assign(who(), subs)
    assert a.metrics == ("org.apache.kafka.consumer.fetch", "org.apache.kafka.producer.")
    assert a.interval_ms == 2000
    # nothing matches: no metrics, the default interval
    none = assign(who(client_id="x", client_source_port=1), subs[2:])
    assert (none.metrics, none.interval_ms) == ((), DEFAULT_INTERVAL_MS)
    # any subscription asking for everything: just "*"
    every = assign(who(), (*subs, sub("all", "*")))
    assert every.metrics == (ALL_METRICS,)


def test_subscription_ids_depend_on_the_metrics_interval_and_instance() -> None:
    subs = (sub("a", "x.,y.", "1000"),)
    a1, a2 = assign(who(), subs), assign(who(), subs)
    assert a1.subscription_id == a2.subscription_id  # any broker computes the same id
    other = assign(who(uuid.UUID(int=5)), subs)
    assert other.subscription_id != a1.subscription_id
    assert assign(who(), (sub("a", "x.,y.", "2000"),)).subscription_id != a1.subscription_id
    assert -(2**31) <= a1.subscription_id < 2**31


def test_subscriptions_come_from_client_metrics_configs() -> None:
    image = MetadataImage()
    t = ConfigResourceType.CLIENT_METRICS
    for name, key, value in [
        ("s1", "metrics", "a.,b."),
        ("s1", "interval.ms", "1500"),
        ("s2", "match", "client_id=x"),
    ]:
        image.apply(ConfigRecord(t, name, key, value))
    image.apply(ConfigRecord(ConfigResourceType.TOPIC, "t", "retention.ms", "1"))
    subs = {s.name: s for s in subscriptions_of(image)}
    assert set(subs) == {"s1", "s2"}
    assert subs["s1"].metrics == ("a.", "b.") and subs["s1"].interval_ms == 1500
    assert subs["s2"].metrics == () and subs["s2"].interval_ms == DEFAULT_INTERVAL_MS


class Harness:
    """A manager with an ids counter, one subscription set, and time under the test's control."""

    def __init__(self, metrics: str = "*", interval: str = "1000", max_bytes: int = 1024) -> None:
        ids = (uuid.UUID(int=1000 + i) for i in itertools.count())
        self.m = ClientMetricsManager(max_bytes, lambda: next(ids))
        self.subs: tuple = (sub("s", metrics, interval),)
        self.version: object = 1
        self.now = 10_000

    def get(self, instance_id: uuid.UUID = ZERO) -> object:
        return self.m.get_subscriptions(instance_id, who, "User:ANONYMOUS", self.subs, self.version, self.now)

    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        payload: bytes = b"m",
        *,
        terminating: bool = False,
        compression: int = NONE,
    ) -> int:
        return self.m.push(
            instance_id,
            subscription_id,
            terminating,
            compression,
            payload,
            who,
            "User:ANONYMOUS",
            self.subs,
            self.version,
            self.now,
            1_700_000_000_000 + self.now,
        )


def test_a_client_gets_an_id_then_pushes_at_its_interval() -> None:
    h = Harness()
    first = h.get()
    assert first.error_code == E.NONE and first.client_instance_id == uuid.UUID(int=1000)
    a = first.assignment
    assert a.metrics == ("*",) and a.interval_ms == 1000
    cid = first.client_instance_id
    # asking again before the interval is over: throttled
    h.now += 500
    assert h.get(cid).error_code == E.THROTTLING_QUOTA_EXCEEDED
    # the first push after a GetTelemetrySubscriptions may come at once (clients add jitter)
    assert h.push(cid, a.subscription_id, b"payload") == E.NONE
    # the next one only after an interval
    h.now += 400
    assert h.push(cid, a.subscription_id) == E.THROTTLING_QUOTA_EXCEEDED
    h.now += 600
    assert h.push(cid, a.subscription_id, b"second") == E.NONE
    ((_, inst),) = h.m.instances(h.now)
    assert inst.pushes == 2 and inst.metrics == b"second" and inst.pushed_at_ms == 1_700_000_000_000 + h.now
    assert inst.identity.client_id == "billing-producer" and inst.principal == "User:ANONYMOUS"


def test_a_changed_subscription_makes_the_old_id_unknown_and_allows_an_early_get() -> None:
    h = Harness()
    first = h.get()
    cid, old = first.client_instance_id, first.assignment
    assert h.push(cid, old.subscription_id) == E.NONE
    h.subs, h.version = (sub("s", "org.apache.kafka.producer.", "2000"),), 2
    h.now += 1000
    assert h.push(cid, old.subscription_id) == E.UNKNOWN_SUBSCRIPTION_ID
    again = h.get(cid)  # at once: the last push failed for a stale subscription id
    assert again.error_code == E.NONE and again.client_instance_id == cid
    assert again.assignment.subscription_id != old.subscription_id
    assert again.assignment.metrics == ("org.apache.kafka.producer.",)
    assert h.push(cid, again.assignment.subscription_id) == E.NONE


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_every_codec_is_read(codec: int) -> None:
    h = Harness(max_bytes=1 << 20)
    a = h.get()
    data = b"otlp " * 1000
    assert (
        h.push(a.client_instance_id, a.assignment.subscription_id, compress(codec, data), compression=codec)
        == 0
    )
    ((_, inst),) = h.m.instances(h.now)
    assert inst.metrics == data


def test_push_errors() -> None:
    h = Harness(max_bytes=100)
    a = h.get()
    cid, sid = a.client_instance_id, a.assignment.subscription_id
    assert h.push(ZERO, sid) == E.INVALID_REQUEST  # a reserved instance id
    assert h.push(cid, sid, b"x" * 101) == E.TELEMETRY_TOO_LARGE
    h.now += 1000
    assert h.push(cid, sid, compression=9) == E.UNSUPPORTED_COMPRESSION_TYPE
    assert h.get(cid).error_code == E.NONE  # an unknown codec lets the client ask again at once
    h.now += 1000
    assert h.push(cid, sid, b"\x00garbage", compression=ZSTD) == E.INVALID_RECORD
    h.now += 1000
    # a terminating push may come early; nothing after it is accepted
    assert h.push(cid, sid, b"bye") == E.NONE
    assert h.push(cid, sid, b"last", terminating=True) == E.NONE
    h.now += 5000
    assert h.push(cid, sid) == E.INVALID_REQUEST
    # a push from an instance this broker never saw (it asked another broker) is accepted when its
    # subscription id is the one this broker computes for it
    stranger = uuid.UUID(int=77)
    expected = assign(who(stranger), h.subs).subscription_id
    assert h.push(stranger, expected) == E.NONE
    assert h.push(uuid.UUID(int=78), expected) == E.UNKNOWN_SUBSCRIPTION_ID


def test_memory_is_bounded() -> None:
    ids = (uuid.UUID(int=2000 + i) for i in itertools.count())
    m = ClientMetricsManager(1000, lambda: next(ids), max_instances=3, max_payload_bytes=2500)
    subs, now = (sub("s", "*", "1000"),), 0
    got = []
    for _ in range(4):
        a = m.get_subscriptions(ZERO, who, "p", subs, 1, now)
        assert (
            m.push(
                a.client_instance_id,
                a.assignment.subscription_id,
                False,
                NONE,
                b"x" * 1000,
                who,
                "p",
                subs,
                1,
                now,
                now,
            )
            == E.NONE
        )
        got.append(a.client_instance_id)
        now += 1
    instances = m.instances(now)
    assert [i for i, _ in instances] == got[1:]  # at most 3: the least recently heard from went
    assert sum(len(inst.metrics or b"") for _, inst in instances) <= 2500
    assert instances[-1][1].metrics is not None  # the newest push is kept
    # instances not heard from for three intervals (at least a minute) are forgotten
    assert m.instances(now + 60_000) == []
