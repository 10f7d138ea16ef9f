"""``pylog cluster | topic | group`` against a real broker process, checked with kafka-python."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from compat_broker import BrokerProcess, free_port, pylog_command
from compat_clients import Rec, consume, produce


def pylog(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*pylog_command(), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)


def ok(*args: str, stdin: str | None = None) -> str:
    out = pylog(*args, stdin=stdin)
    assert out.returncode == 0, f"pylog {' '.join(args)} failed: {out.stderr}"
    return out.stdout


def as_json(*args: str, stdin: str | None = None) -> Any:
    return json.loads(ok(*args, "--format", "json", stdin=stdin))


def test_cluster_info(broker: BrokerProcess) -> None:
    info = as_json("cluster", "info", "-b", broker.bootstrap)
    assert info["controller_id"] == 1 and info["cluster_id"]
    assert [(b["node_id"], b["host"], b["port"]) for b in info["brokers"]] == [(1, broker.host, broker.port)]
    text = ok("cluster", "info", "-b", broker.bootstrap)
    assert f"CLUSTER     {info['cluster_id']}" in text and f"1*      {broker.host}  {broker.port}" in text


def test_unreachable_cluster_is_one_clear_line() -> None:
    port = free_port()
    started = time.monotonic()
    out = pylog("topic", "list", "-b", f"127.0.0.1:{port}", "--timeout", "2")
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == (f"pylog: cannot reach a Kafka cluster at 127.0.0.1:{port} within 2s "
                          "(is a broker running there? pass -b HOST:PORT)\n")
    assert time.monotonic() - started < 30


def test_topic_lifecycle(broker: BrokerProcess, topic_name: str) -> None:
    b = ("-b", broker.bootstrap)
    assert "created" in ok("topic", "create", topic_name, "-p", "3", "-c", "retention.ms=3600000", *b)
    listed = {t["topic"]: t for t in as_json("topic", "list", *b)}
    assert listed[topic_name] == {"topic": topic_name, "partitions": 3, "replicas": 1, "internal": False}
    assert topic_name in ok("topic", "list", *b)

    (desc,) = as_json("topic", "describe", topic_name, *b)
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["isr"] == [1] and p["high_watermark"] == 0 for p in desc["partitions"])
    assert desc["configs"]["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert "HIGH-WATERMARK" in ok("topic", "describe", topic_name, *b)

    ok("topic", "alter-config", topic_name, "--set", "cleanup.policy=compact", "--delete", "retention.ms", *b)
    (desc,) = as_json("topic", "describe", topic_name, *b)
    assert desc["configs"]["cleanup.policy"] == {"value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert desc["configs"]["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    bad = pylog("topic", "alter-config", topic_name, "--set", "cleanup.polcy=compact", *b)
    assert bad.returncode == 1 and "did you mean cleanup.policy" in bad.stdout

    again = pylog("topic", "create", topic_name, *b)
    assert again.returncode == 1 and f"Topic '{topic_name}' already exists." in again.stdout
    assert "deleted" in ok("topic", "delete", topic_name, *b)
    assert topic_name not in {t["topic"] for t in as_json("topic", "list", *b)}


@pytest.mark.parametrize("command", [("describe",), ("delete",), ("consume", "-n", "1"), ("produce",),
                                     ("alter-config", "--set", "retention.ms=1")])
def test_unknown_topic(broker: BrokerProcess, command: tuple[str, ...]) -> None:
    out = pylog("topic", command[0], "no-such-topic", *command[1:], "-b", broker.bootstrap, stdin="x\n")
    assert out.returncode == 1 and out.stderr == "pylog: unknown topic 'no-such-topic'\n"


def test_produce_lines_then_consume(broker: BrokerProcess, topic_name: str) -> None:
    b = ("-b", broker.bootstrap)
    ok("topic", "create", topic_name, "-p", "1", *b)
    res = as_json("topic", "produce", topic_name, "-K", r"\t", "-H", "source=cli", *b,
                  stdin="k1\thello\nk2\tworld\nno key here\n")
    assert res == {"topic": topic_name, "records": 3,
                   "partitions": [{"partition": 0, "first_offset": 0, "last_offset": 2}]}
    got = consume("kafka-python", broker.bootstrap, topic_name, 3)
    assert [(r.key, r.value, r.headers) for r in got] == [
        (b"k1", b"hello", (("source", b"cli"),)),
        (b"k2", b"world", (("source", b"cli"),)),
        (None, b"no key here", (("source", b"cli"),)),
    ]
    produce("kafka-python", broker.bootstrap, topic_name, [Rec(b"from kafka-python", b"k4")])

    lines = ok("topic", "consume", topic_name, "-o", "beginning", "-n", "10", "-e", "--format", "json", *b)
    records = [json.loads(line) for line in lines.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "k1", "hello"), (1, "k2", "world"), (2, None, "no key here"), (3, "k4", "from kafka-python")]
    assert records[0]["headers"] == [{"key": "source", "value": "cli"}] and records[0]["partition"] == 0
    assert ok("topic", "consume", topic_name, "-o", "beginning", "-n", "2", *b) == "hello\nworld\n"
    assert ok("topic", "consume", topic_name, "-o", "1", "-e", *b,
              "--format", r"{partition}:{offset}\t{key}={value} [{headers}]") == (
        "0:1\tk2=world [source=cli]\n0:2\t=no key here [source=cli]\n0:3\tk4=from kafka-python []\n")
    assert ok("topic", "consume", topic_name, "-o", "-1", "-e", *b) == "from kafka-python\n"
    assert ok("topic", "consume", topic_name, "-o", "end", "-e", *b) == ""


def _committing_consumer(bootstrap: str, topic: str, group: str, count: int) -> Any:
    """A kafka-python group member that has read and committed `count` records (still a member)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="lag-reader",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             max_poll_records=count, request_timeout_ms=20000)
    seen = 0
    deadline = time.monotonic() + 30
    while seen < count and time.monotonic() < deadline:
        seen += sum(len(v) for v in consumer.poll(timeout_ms=500, max_records=count - seen).values())
    assert seen == count
    consumer.commit()
    return consumer


def test_groups_describe_and_reset_offsets(broker: BrokerProcess, topic_name: str) -> None:
    b = ("-b", broker.bootstrap)
    group = f"{topic_name}-g"
    ok("topic", "create", topic_name, "-p", "1", *b)
    produce("kafka-python", broker.bootstrap, topic_name, [Rec(f"v{i}".encode()) for i in range(10)])
    consumer = _committing_consumer(broker.bootstrap, topic_name, group, 4)
    try:
        assert {"group": group, "state": "Stable", "type": "classic", "protocol_type": "consumer"} in \
            as_json("group", "list", *b)
        (desc,) = as_json("group", "describe", group, *b)
        assert desc["state"] == "Stable" and len(desc["members"]) == 1
        (part,) = desc["partitions"]
        row = (part["topic"], part["partition"], part["current_offset"], part["log_end_offset"], part["lag"])
        assert row == (topic_name, 0, 4, 10, 6)
        assert part["client_id"] == "lag-reader" and part["member_id"] == desc["members"][0]["member_id"]
        text = ok("group", "describe", group, *b)
        assert "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in text and "lag-reader" in text
        active = pylog("group", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute", *b)
        assert active.returncode == 1 and f"group {group!r} is active" in active.stderr
    finally:
        consumer.close()

    dry = as_json("group", "reset-offsets", group, "-t", topic_name, "--to-earliest", *b)
    assert dry == {"group": group, "executed": False, "partitions": [
        {"topic": topic_name, "partition": 0, "current_offset": 4, "new_offset": 0}]}
    assert "dry run" in ok("group", "reset-offsets", group, "--all-topics", "--to-latest", *b)
    (desc,) = as_json("group", "describe", group, *b)
    assert desc["partitions"][0]["current_offset"] == 4  # a dry run changes nothing

    done = as_json("group", "reset-offsets", group, "-t", f"{topic_name}:0", "--to-offset", "7", "--execute",
                   *b)
    assert done["executed"] and done["partitions"][0]["new_offset"] == 7
    (desc,) = as_json("group", "describe", group, *b)
    assert desc["state"] == "Empty" and desc["partitions"][0]["current_offset"] == 7
    assert desc["partitions"][0]["lag"] == 3
    ok("group", "reset-offsets", group, "--all-topics", "--to-offset", "99", "--execute", *b)
    assert as_json("group", "describe", group, *b)[0]["partitions"][0]["current_offset"] == 10  # clamped
    ok("group", "reset-offsets", group, "--all-topics", "--to-timestamp", "0", "--execute", *b)
    assert as_json("group", "describe", group, *b)[0]["partitions"][0]["current_offset"] == 0


def test_unknown_group(broker: BrokerProcess) -> None:
    out = pylog("group", "describe", "no-such-group", "-b", broker.bootstrap)
    assert out.returncode == 1
    assert out.stderr == "pylog: unknown group 'no-such-group': no such consumer group\n"
