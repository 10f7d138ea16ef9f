"""Per-record produce errors (KIP-467) over a real socket with our own codec: Kafka's LogValidator
rules, the batch refused whole, the offending records listed by batch index."""

from __future__ import annotations

import struct
import time

import pyarrow as pa
import pytest
from crc32c import crc32c
from harness import Client
from pylog.protocol import records as rec
from pylog.protocol.errors import ErrorCode
from records_util import make_batch
from test_produce_fetch import create, fetch, produce

from pylog.broker.datapath.record_validation import RecordRules, validate_records

ATTRIBUTES_AT = 21
LOG_APPEND_TIME = 0x08


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def resign(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[ATTRIBUTES_AT:]))
    return bytes(batch)


def test_keyless_records_on_a_compacted_topic(client: Client) -> None:
    create(client, "compacted", configs={"cleanup.policy": "compact"})
    keys = [None if i % 4 == 1 else b"k%d" % i for i in range(12)]
    res = produce(client, "compacted", make_batch([b"v"] * 12, keys=keys))
    assert res.error_code == ErrorCode.INVALID_RECORD and res.base_offset == -1
    assert [e.batch_index for e in res.record_errors] == [1, 5, 9]
    assert all("without key" in e.batch_index_error_message for e in res.record_errors)
    assert res.error_message.startswith("One or more records have been rejected due to 3 record errors")
    assert fetch(client, "compacted", 0).high_watermark == 0
    assert produce(client, "compacted", make_batch([b"v"], keys=[b"k"])).error_code == 0


def test_timestamps_outside_the_topic_window(client: Client) -> None:
    create(
        client,
        "window",
        configs={"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"},
    )
    base = now_ms()
    # make_batch stamps record i with base + i: shift single records by rewriting the batch
    table = rec.decode_batch(make_batch([b"v"] * 6, timestamp=base)).records
    ts = [base, base - 3_600_000, base, base + 3_600_000, -1, base]
    table = table.set_column(1, "timestamp", pa.array(ts, pa.timestamp("ms")))
    res = produce(client, "window", rec.encode_batch(table, base_offset=0, base_timestamp=base))
    assert res.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in res.record_errors] == [1, 3]  # -1 is "no timestamp": not checked
    assert "of message with offset 3 is out of range" in res.record_errors[1].batch_index_error_message
    assert res.error_message == "One or more records have been rejected due to invalid timestamp"


def test_a_record_gets_its_key_error_first(client: Client) -> None:
    create(client, "both", configs={"cleanup.policy": "compact", "message.timestamp.before.max.ms": "1000"})
    old = now_ms() - 3_600_000
    keys = [None, b"k", b"k"]
    res = produce(client, "both", make_batch([b"v"] * 3, keys=keys, timestamp=old))
    assert res.error_code == ErrorCode.INVALID_TIMESTAMP  # any timestamp error sets the batch's code
    messages = [e.batch_index_error_message for e in res.record_errors]
    assert [e.batch_index for e in res.record_errors] == [0, 1, 2]
    assert "without key" in messages[0] and "out of range" in messages[1]


def test_producers_may_not_set_log_append_time(client: Client) -> None:
    create(client, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    batch = bytearray(make_batch([b"a", b"b"]))
    attributes = struct.unpack_from(">h", batch, ATTRIBUTES_AT)[0]
    struct.pack_into(">h", batch, ATTRIBUTES_AT, attributes | LOG_APPEND_TIME)
    res = produce(client, "lat", resign(batch))
    assert res.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in res.record_errors] == [0, 1]
    assert "LogAppendTime" in res.record_errors[0].batch_index_error_message
    assert produce(client, "lat", make_batch([b"a"])).error_code == 0


def test_a_null_header_key_is_an_invalid_record(client: Client) -> None:
    """Kafka reads a negative header key length as a broken record: INVALID_RECORD for the batch."""
    create(client, "hdr")
    table = rec.decode_batch(make_batch([b"v"])).records
    headers = pa.array([[{"key": "h", "value": b"x"}]], table.schema.field("headers").type)
    batch = bytearray(rec.encode_batch(table.set_column(4, "headers", headers), base_offset=0))
    at = bytes(batch).rindex(b"\x02h\x02x")  # key length 1 (zig-zag 2), "h", value length 1, "x"
    batch[at] = 0x01  # key length -1
    res = produce(client, "hdr", resign(batch))
    assert res.error_code == ErrorCode.INVALID_RECORD and not res.record_errors
    assert "invalid record structure" in res.error_message
    assert fetch(client, "hdr", 0).high_watermark == 0


def test_validation_is_skipped_when_nothing_can_fail() -> None:
    table = rec.decode_batch(make_batch([b"v"] * 3)).records  # keyless, timestamps far in the past
    unbounded = 2**63 - 1
    rules = RecordRules(
        compacted=False,
        log_append_time=False,
        timestamp_before_max_ms=unbounded,
        timestamp_after_max_ms=unbounded,
    )
    found = validate_records(
        table,
        rules,
        now_ms=now_ms(),
        producer_log_append_time=False,
        max_timestamp=-1,
        offset_shift=0,
        topic_partition="t-0",
    )
    assert found is None


@pytest.mark.parametrize("segment_format", ["1", "2"])
def test_an_unknown_compression_codec_is_a_corrupt_message(client: Client, segment_format: str) -> None:
    """Attribute bits 0-2 name codecs 0-4; a batch whose CRC holds but names 5, 6 or 7 is refused
    with CORRUPT_MESSAGE, not a failed request, and the partition takes the next batch (the same
    answer whichever segment format the leader writes)."""
    topic = f"codec-{segment_format}"
    create(client, topic, configs={"pylog.segment.format": segment_format})
    for codec in (5, 6, 7):
        batch = bytearray(make_batch([b"v"]))
        attributes = struct.unpack_from(">h", batch, ATTRIBUTES_AT)[0]
        struct.pack_into(">h", batch, ATTRIBUTES_AT, attributes | codec)
        res = produce(client, topic, resign(batch))
        assert res.error_code == ErrorCode.CORRUPT_MESSAGE
        assert f"unknown compression codec {codec}" in res.error_message
    assert fetch(client, topic, 0).high_watermark == 0
    assert produce(client, topic, make_batch([b"ok"])).base_offset == 0
