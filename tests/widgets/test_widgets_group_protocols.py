"""`pw.lag` / `pw.groups` over a real broker show consumer groups of both protocols and share groups
(start offset, in-flight and acquired counts), driven by unmodified confluent-kafka clients."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pylog.widgets as pw
import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def broker() -> Iterator[pylog.LocalBroker]:
    b = pylog.LocalBroker(config={"share.auto.offset.reset": "earliest"})
    b.start()
    yield b
    b.close()


def setup(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def test_consumer_protocol_group_in_lag(broker: pylog.LocalBroker) -> None:
    bootstrap = broker.bootstrap_servers
    setup(bootstrap, "kip848-lag", 2, 10)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kip848",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe(["kip848-lag"])
        read = 0
        end = time.monotonic() + DEADLINE_S
        while read < 6 and time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                read += 1
                if read == 6:
                    c.commit(m, asynchronous=False)
        df = pw.lag("kip848", bootstrap_servers=bootstrap)
        assert set(df["group_type"]) == {"consumer"}
        assert df["member_id"].notna().all(), "KIP-848 assignments come from ConsumerGroupDescribe"
        assert len(df) == 2 and df["log_end_offset"].sum() == 10
        g = pw.groups("kip848", bootstrap_servers=bootstrap)
        assert g.loc[0, "state"] in ("Stable", "Reconciling") and g.loc[0, "members"] == 1
    finally:
        c.close()


def test_share_group_in_lag_with_in_flight_and_acquired(broker: pylog.LocalBroker) -> None:
    bootstrap = broker.bootstrap_servers
    setup(bootstrap, "share-lag", 1, 20)
    c = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "share-lag-g", "share.acknowledgement.mode": "explicit"}
    )
    try:
        c.subscribe(["share-lag"])
        got: list = []
        end = time.monotonic() + DEADLINE_S
        while not got and time.monotonic() < end:
            got = [m for m in c.poll(0.2) if m.error() is None]
        assert got
        df = pw.lag("share-lag-g", bootstrap_servers=bootstrap)  # records held, not acknowledged
        row = df.iloc[0]
        assert row["group_type"] == "share" and row["committed_offset"] == 0 and row["log_end_offset"] == 20
        assert row["acquired"] == len(got) and row["in_flight"] >= len(got)
        g = pw.groups(None, bootstrap_servers=bootstrap)
        share_row = g[g["group"] == "share-lag-g"].iloc[0]
        assert share_row["group_type"] == "share" and share_row["acquired"] == len(got)
    finally:
        c.close()
