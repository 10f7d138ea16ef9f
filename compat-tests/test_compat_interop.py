"""Keys, headers and timestamps written by one client are read unchanged by every other."""

from __future__ import annotations

import time

import pytest
from compat_broker import BrokerProcess
from compat_clients import ALL_CLIENTS, PYTHON_CLIENTS, Produced, Rec, consume, create_topic, produce

BASE_TS = 1_600_000_000_000  # in the past: always accepted whatever the timestamp bounds
PAIRS = [(p, c) for p in ALL_CLIENTS for c in ALL_CLIENTS]


def text_records(with_timestamps: bool) -> list[Rec]:
    """Line-safe text records (kcat can send them) spread over three partitions."""

    def ts(i: int) -> int | None:
        return BASE_TS + i * 1000 if with_timestamps else None

    return [
        Rec(b"plain value", b"key-0", (("h-one", b"1"), ("h-two", b"second header")), ts(0), 0),
        Rec(
            "h\u00e9llo w\u00f6rld \u2713".encode(),
            b"key-\xc3\xa9".replace(b"\xc3\xa9", "\u00e9".encode()),
            (("trace-id", b"abc123"),),
            ts(1),
            1,
        ),
        Rec(b"no key on this one", None, (), ts(2), 2),
        Rec(b"", b"key-empty-value", (("h-empty", b""),), ts(3), 0),
        Rec(b"repeated header keys", b"key-4", (("dup", b"a"), ("dup-2", b"b")), ts(4), 0),
    ]


_produced: dict[tuple[str, str], tuple[str, list[Rec], Produced, int, int]] = {}


def produced_by(producer: str, bootstrap: str) -> tuple[str, list[Rec], Produced, int, int]:
    """One topic per producer per broker, written once and read by every consumer."""
    key = (producer, bootstrap)
    if key not in _produced:
        topic = f"interop-{producer}-{time.time_ns()}"
        create_topic(bootstrap, topic, partitions=3)
        recs = text_records(with_timestamps=producer != "kcat")
        t0 = int(time.time() * 1000)
        result = produce(producer, bootstrap, topic, recs)
        t1 = int(time.time() * 1000)
        _produced[key] = (topic, recs, result, t0, t1)
    return _produced[key]


def need_tools(request: pytest.FixtureRequest, *clients: str) -> None:
    for c in clients:
        if c in ("kcat", "kafkajs"):
            request.getfixturevalue(c)


@pytest.mark.parametrize(("producer", "consumer"), PAIRS, ids=[f"{p}->{c}" for p, c in PAIRS])
def test_keys_headers_timestamps(
    broker: BrokerProcess, producer: str, consumer: str, request: pytest.FixtureRequest
) -> None:
    need_tools(request, producer, consumer)
    topic, sent, result, t0, t1 = produced_by(producer, broker.bootstrap)
    got = consume(consumer, broker.bootstrap, topic, len(sent), partitions=(0, 1, 2))
    expected = sorted(sent, key=lambda r: r.partition or 0)  # stable: keeps send order per partition
    assert [r.content() for r in got] == [r.content() for r in expected]
    for g, e in zip(got, expected):
        if e.timestamp is not None:
            assert g.timestamp == e.timestamp, f"timestamp of {e.key!r}"
        else:
            # The producer stamped the record itself (CreateTime) while we waited for it.
            assert g.timestamp is not None and t0 - 1000 <= g.timestamp <= t1 + 1000
        if g.timestamp_type is not None:
            assert g.timestamp_type == 0, "CreateTime expected"
    if producer != "kcat":
        by_value = {r.value: (r.partition, r.offset) for r in got}
        assert [by_value[r.value] for r in sent] == result.positions


BINARY_CLIENTS = (*PYTHON_CLIENTS, "kafkajs")
BIN_PAIRS = [(p, c) for p in BINARY_CLIENTS for c in BINARY_CLIENTS]


@pytest.mark.parametrize(("producer", "consumer"), BIN_PAIRS, ids=[f"{p}->{c}" for p, c in BIN_PAIRS])
def test_binary_and_null_values(
    broker: BrokerProcess, topic_name: str, producer: str, consumer: str, request: pytest.FixtureRequest
) -> None:
    """Arbitrary bytes, a null value (tombstone) and a binary header value round-trip exactly."""
    need_tools(request, producer, consumer)
    create_topic(broker.bootstrap, topic_name, partitions=1)
    sent = [
        Rec(bytes(range(256)), b"\x00\xff\x00", (("bin", bytes(range(255, -1, -1))),), BASE_TS, 0),
        Rec(None, b"tombstone-key", (), BASE_TS + 1, 0),
        Rec(b"\x00" * 1000, b"", (), BASE_TS + 2, 0),
    ]
    produce(producer, broker.bootstrap, topic_name, sent)
    got = consume(consumer, broker.bootstrap, topic_name, len(sent))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.key, r.value, r.headers, r.timestamp) for r in sent
    ]
