"""The DataFrame forms (`lag`, `groups`, `partitions`, `latest_records`) and `LagMonitor` statuses
against a real pylog broker process, driven by kafka-python."""

from __future__ import annotations

import json
import struct
import time

import pandas as pd
import pylog.widgets as pw
import pytest
from pylog.widgets.admin import decode_assignment
from pylog.widgets.consumer_lag import PARTITION_COLUMNS, LagMonitor
from widgets_helpers import commit, create_topic, member, produce, to_commit

from pylog.sdk.offsets import UnknownTopicError

COUNTS = [30, 20, 10]


@pytest.fixture(scope="module")
def orders(broker):  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "orders", 3)
    produce(bs, "orders", COUNTS)
    commit(bs, "billing", {("orders", 0): 25, ("orders", 1): 20, ("orders", 2): 4})
    return bs


def test_lag_of_a_group(orders: str) -> None:
    df = pw.lag("billing", bootstrap_servers=orders)
    assert list(df.columns) == PARTITION_COLUMNS
    assert df[["topic", "partition", "committed_offset", "log_end_offset", "lag"]].values.tolist() == [
        ["orders", 0, 25, 30, 5], ["orders", 1, 20, 20, 0], ["orders", 2, 4, 10, 6]]
    assert str(df["lag"].dtype) == "Int64"
    # one look decides only a zero lag; the rest needs a window
    assert df["status"].tolist()[1] == "OK"
    assert pd.isna(df["status"].tolist()[0]) and pd.isna(df["status"].tolist()[2])
    assert set(df["group_state"]) == {"Empty"} and df["member_id"].isna().all()
    assert df["coordinator"].str.endswith("(node 1)").all()


def test_groups_and_all_groups(orders: str) -> None:
    commit(orders, "audit", {("orders", 1): 5})
    g = pw.groups(["billing", "audit"], bootstrap_servers=orders).set_index("group")
    assert g.loc["billing", "total_lag"] == 11 and g.loc["billing", "max_lag"] == 6
    assert g.loc["billing", "partitions"] == 3 and g.loc["billing", "members"] == 0
    assert g.loc["audit", "total_lag"] == 15
    everything = pw.lag(bootstrap_servers=orders)
    assert {"billing", "audit"} <= set(everything["group"])
    assert everything[everything["group"] == "audit"]["lag"].tolist() == [15]


def test_owners_of_a_live_group(orders: str) -> None:
    consumer = member(orders, "shipping", "orders", "shipper-1")
    try:
        commit_offsets = {("orders", 0): 30, ("orders", 1): 10, ("orders", 2): 10}
        consumer.commit(to_commit(commit_offsets))
        df = pw.lag("shipping", bootstrap_servers=orders)
        assert df["lag"].tolist() == [0, 10, 0]
        assert set(df["client_id"]) == {"shipper-1"}
        assert df["member_id"].str.startswith("shipper-1").all()
        assert set(df["host"]) == {"127.0.0.1"}
        assert set(df["group_state"]) == {"Stable"}
        g = pw.groups("shipping", bootstrap_servers=orders)
        assert g["members"].tolist() == [1] and g["protocol"].tolist() == ["range"]
    finally:
        consumer.close()


def test_burrow_statuses_from_successive_polls(broker) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "events", 3)
    produce(bs, "events", [10, 10, 10])
    commit(bs, "etl", {("events", 0): 5, ("events", 1): 5, ("events", 2): 5})
    mon = LagMonitor("etl", bootstrap_servers=bs)
    try:
        t = 1_000_000
        first = mon.poll(now_ms=t)
        assert [p["status"] for p in first["groups"][0]["partitions"]] == [None, None, None]
        # p0 moves forward while falling behind, p1 catches up, p2 goes backwards
        produce(bs, "events", [10, 0, 0], start=100)
        commit(bs, "etl", {("events", 0): 8, ("events", 1): 10, ("events", 2): 2})
        snap = mon.poll(now_ms=t + 1000)
        statuses = {p["partition"]: p["status"] for p in snap["groups"][0]["partitions"]}
        assert statuses == {0: "WARN", 1: "OK", 2: "ERR"}
        assert snap["groups"][0]["status"] == "ERR"
        # nobody commits (the group has no members): after a silence longer than the window, STOP
        late = mon.poll(now_ms=t + 5000)
        statuses = {p["partition"]: p["status"] for p in late["groups"][0]["partitions"]}
        assert statuses == {0: "STOP", 1: "OK", 2: "STOP"}
        assert [h[1] for h in mon.history_json()["etl"]] == [15, 20, 20]
        df = mon.partitions_frame()
        assert df["status"].tolist() == ["STOP", "OK", "STOP"]
    finally:
        mon.close()


def test_stall_when_a_live_member_does_not_move(broker) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "stuck", 1)
    produce(bs, "stuck", [10])
    consumer = member(bs, "stuck-group", "stuck", "stuck-1")
    mon = LagMonitor("stuck-group", bootstrap_servers=bs)
    try:
        consumer.commit(to_commit({("stuck", 0): 3}))
        mon.poll(now_ms=0)
        produce(bs, "stuck", [5], start=100)
        snap = mon.poll(now_ms=60_000)  # a live owner counts as committing: STALL, not STOP
        assert snap["groups"][0]["partitions"][0]["status"] == "STALL"
        assert snap["groups"][0]["partitions"][0]["lag"] == 12
    finally:
        mon.close()
        consumer.close()


def test_partitions_from_cluster_data_dir_and_both(orders: str, broker) -> None:  # type: ignore[no-untyped-def]
    remote = pw.partitions("orders", bootstrap_servers=orders)
    assert remote["partition"].tolist() == [0, 1, 2]
    assert remote["leader"].tolist() == [1, 1, 1]
    assert remote["replicas"].tolist() == [[1], [1], [1]] and remote["isr"].tolist() == [[1], [1], [1]]
    assert remote["log_start_offset"].tolist() == [0, 0, 0]
    assert remote["log_end_offset"].tolist() == COUNTS and remote["records"].tolist() == COUNTS
    # bytes from the broker's DescribeLogDirs; segments only from a data directory
    assert (remote["bytes"] > 0).all() and remote["segments"].isna().all()
    assert not any("DescribeLogDirs" in n for n in remote.attrs["notes"])

    local = pw.partitions("orders", data_dir=broker.data_dir)
    assert local["log_end_offset"].tolist() == COUNTS
    assert (local["bytes"] > 0).all() and (local["segments"] >= 1).all()
    assert local["leader"].isna().all()

    both = pw.partitions("orders", bootstrap_servers=orders, data_dir=broker.data_dir)
    assert both["leader"].tolist() == [1, 1, 1]
    assert both["bytes"].tolist() == local["bytes"].tolist()
    assert both["segments"].tolist() == local["segments"].tolist()
    assert not any("DescribeLogDirs" in n for n in both.attrs["notes"])

    with pytest.raises(UnknownTopicError):
        pw.partitions("nope", bootstrap_servers=orders)
    with pytest.raises(UnknownTopicError):
        pw.partitions("nope", data_dir=broker.data_dir)
    with pytest.raises(ValueError, match="bootstrap_servers"):
        pw.partitions("orders")


def test_latest_records(orders: str, broker) -> None:  # type: ignore[no-untyped-def]
    df = pw.latest_records("orders", 4, bootstrap_servers=orders)
    assert list(df.columns) == ["partition", "offset", "timestamp", "key", "value"]
    assert len(df) == 4
    assert all(json.loads(v)["i"] < 60 for v in df["value"])
    assert df["timestamp"].is_monotonic_decreasing
    # the newest of each partition come first among equal timestamps; all are near the end
    ends = dict(enumerate(COUNTS))
    assert all(o >= ends[p] - 4 for p, o in zip(df["partition"], df["offset"]))
    from_dir = pw.latest_records("orders", 100, data_dir=broker.data_dir, decode="hex")
    assert len(from_dir) == sum(COUNTS)
    assert from_dir["key"].str.match(r"^6b( [0-9a-f]{2})+$").all()  # "k..." as hex
    one = pw.latest_records("orders", 3, bootstrap_servers=orders, partitions=[2])
    assert one["partition"].tolist() == [2, 2, 2] and sorted(one["offset"]) == [7, 8, 9]


def test_decode_assignment() -> None:
    def assignment(topics: dict[str, list[int]], version: int = 1) -> bytes:
        out = struct.pack(">hi", version, len(topics))
        for t, ps in topics.items():
            out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
            out += struct.pack(f">{len(ps)}i", *ps)
        return out + struct.pack(">i", -1)  # null user data

    assert decode_assignment(assignment({"a": [0, 2], "bb": [1]})) == {"a": [0, 2], "bb": [1]}
    assert decode_assignment(b"") == {} and decode_assignment(None) == {}
    assert decode_assignment(b"\x00\x01\x00") == {}  # truncated: not a consumer assignment


def test_lag_from_the_data_dir(broker) -> None:  # type: ignore[no-untyped-def]
    bs = broker.bootstrap_servers
    create_topic(bs, "ledger", 2)
    produce(bs, "ledger", [6, 4])
    commit(bs, "books", {("ledger", 0): 2, ("ledger", 1): 4})
    produce(bs, "ledger", [4, 0], start=100)
    commit(bs, "books", {("ledger", 0): 3})
    consumer = member(bs, "auditors", "ledger", "auditor-1")
    try:
        consumer.commit(to_commit({("ledger", 0): 1}))
        offline = pw.lag(["books", "auditors"], data_dir=broker.data_dir)
        online = pw.lag(["books", "auditors"], bootstrap_servers=bs)
    finally:
        consumer.close()
    cols = ["group", "topic", "partition", "committed_offset", "log_end_offset", "lag", "client_id"]
    assert offline[cols].astype(object).fillna(-1).values.tolist() == \
        online[cols].astype(object).fillna(-1).values.tolist()
    assert offline[offline["group"] == "books"]["lag"].tolist() == [7, 0]
    # two commits of p0, the lag grew between them, and an hour later nobody has committed since: STOP
    mon = LagMonitor("books", data_dir=broker.data_dir)
    snap = mon.poll(now_ms=int(time.time() * 1000) + 3_600_000)
    assert [p["status"] for p in snap["groups"][0]["partitions"]] == ["STOP", "OK"]
    assert snap["groups"][0]["status"] == "ERR"
    auditors = offline[offline["group"] == "auditors"]
    assert set(auditors["group_state"]) == {"Stable"} and set(auditors["client_id"]) == {"auditor-1"}
    assert pd.isna(auditors["status"].tolist()[0])  # a single commit shows no trend
    g = pw.groups(data_dir=broker.data_dir).set_index("group")
    assert g.loc["books", "total_lag"] == 7
    assert g.loc["auditors", "members"] == 0 and g.loc["auditors", "state"] == "Empty"  # it has left
    with pytest.raises(ValueError, match="exactly one"):
        pw.lag("books", bootstrap_servers=bs, data_dir=broker.data_dir)
