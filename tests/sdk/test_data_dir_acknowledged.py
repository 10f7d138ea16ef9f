"""read_topic over a live broker's data directory sees every record acknowledged before the read began
(the broker publishes its high watermark beside the segments before it acknowledges), not only what
its last high-watermark checkpoint covered."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.storage.checkpoint import HIGH_WATERMARK_FILE, read_offset_checkpoint
from pylog.storage.published_hw import (
    PUBLISHED_HW_FILE,
    PublishedHighWatermark,
    read_published_high_watermark,
)
from sdk_helpers import running_broker

import pylog

ROUNDS = 5
PER_ROUND = 2_000


@pytest.fixture(scope="module")
def broker() -> Iterator[pylog.LocalBroker]:
    # a checkpoint written now and then, so that a reader trusting it would lag behind
    yield from running_broker({"replica.high.watermark.checkpoint.interval.ms": 2_000})


@pytest.mark.parametrize("acks", ["1", "all"])
def test_a_read_sees_every_acknowledged_record(broker: pylog.LocalBroker, acks: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = broker.bootstrap_servers
    topic = f"acked-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 5})
    sent = 0
    for round_ in range(ROUNDS):
        for i in range(PER_ROUND):
            producer.produce(topic, value=b"v%d" % (sent + i), partition=i % 2)
        assert producer.flush(30) == 0
        sent += PER_ROUND
        table = pylog.read_topic(topic, data_dir=broker.data_dir, columns=["value"])
        assert table.num_rows == sent
        if round_ == 0:  # from now on the checkpoint names the topic, and lags behind each round
            wait_for_checkpoint(broker.data_dir, topic)
    assert sorted(table.column("value").to_pylist()) == sorted(b"v%d" % i for i in range(sent))


def wait_for_checkpoint(data_dir: Path, topic: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(t == topic for t, _ in read_offset_checkpoint(data_dir / HIGH_WATERMARK_FILE)):
            return
        time.sleep(0.1)
    pytest.fail(f"the broker wrote no high-watermark checkpoint naming {topic} in 30 s")


def test_published_high_watermark_file(tmp_path: Path) -> None:
    assert read_published_high_watermark(tmp_path) is None  # an older broker: none published
    hw = PublishedHighWatermark(tmp_path)
    assert read_published_high_watermark(tmp_path) is None  # created, nothing published yet
    hw.publish(42)
    assert read_published_high_watermark(tmp_path) == 42
    again = PublishedHighWatermark(tmp_path)  # a restart keeps what was published
    assert read_published_high_watermark(tmp_path) == 42
    again.publish(7)
    assert read_published_high_watermark(tmp_path) == 7
    hw.close()
    again.close()
    # a write caught half done (the copies differ) or a short file is not trusted
    path = tmp_path / PUBLISHED_HW_FILE
    path.write_bytes((5).to_bytes(8, "little") + (6).to_bytes(8, "little"))
    assert read_published_high_watermark(tmp_path) is None
    path.write_bytes(b"\x01\x02")
    assert read_published_high_watermark(tmp_path) is None
