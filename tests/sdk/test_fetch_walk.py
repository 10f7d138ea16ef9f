"""The read_committed walk over a Fetch response's record batches: control batches and aborted
transactional data never become rows, ranges are clipped, LogAppendTime batches take the broker's time."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
from pylog.protocol.records import RECORD_SCHEMA, encode_batch, encode_control_batch

from pylog.sdk.kafka_source import FetchOptions, _consume_partition, _PartitionCursor
from pylog.sdk.offsets import PartitionRange

T0 = 1_700_000_000_000
COLUMNS = ("offset", "timestamp", "value", "timestampType")


def batch(base: int, n: int, *, pid: int = -1, transactional: bool = False, timestamp_type: int = 0) -> bytes:
    rows = pa.RecordBatch.from_arrays(
        [pa.array(range(base, base + n), pa.int64()), pa.array([T0 + o for o in range(base, base + n)],
                                                               pa.timestamp("ms")),
         pa.nulls(n, pa.binary()), pa.array([f"v{o}".encode() for o in range(base, base + n)]),
         pa.array([[]] * n, RECORD_SCHEMA.field("headers").type)], schema=RECORD_SCHEMA)
    return encode_batch(rows, base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=0 if pid >= 0 else -1, is_transactional=transactional,
                        timestamp_type=timestamp_type, max_timestamp=T0 + 10_000 if timestamp_type else None)


def marker(offset: int, pid: int, commit: bool) -> bytes:
    return encode_control_batch(base_offset=offset, producer_id=pid, producer_epoch=0, commit=commit,
                                coordinator_epoch=0, timestamp_ms=T0)


def response(blob: bytes, aborted: list[tuple[int, int]]) -> SimpleNamespace:
    listed = [SimpleNamespace(producer_id=p, first_offset=o) for p, o in aborted]
    return SimpleNamespace(error_code=0, high_watermark=100, last_stable_offset=100, log_start_offset=0,
                           aborted_transactions=listed, records=memoryview(blob))


def walk(r: PartitionRange, responses: list[SimpleNamespace]) -> pa.Table:
    cursor = _PartitionCursor(r)
    out = []
    for resp in responses:
        out += _consume_partition(cursor, resp, COLUMNS, FetchOptions())
    return pa.Table.from_batches(out) if out else pa.table({c: [] for c in COLUMNS})


LOG = [
    batch(0, 3),                              # 0-2
    batch(3, 2, pid=5, transactional=True),   # 3-4 aborted below
    batch(5, 2, pid=6, transactional=True),   # 5-6 committed below
    marker(7, 5, commit=False),
    marker(8, 6, commit=True),
    batch(9, 2),                              # 9-10
    batch(11, 2, pid=5, transactional=True),  # 11-12 pid 5 again, a new transaction: committed
    marker(13, 5, commit=True),
]


def test_committed_rows_only() -> None:
    table = walk(PartitionRange("t", 0, 0, 14), [response(b"".join(LOG), [(5, 3)])])
    assert table.column("offset").to_pylist() == [0, 1, 2, 5, 6, 9, 10, 11, 12]
    assert table.column("timestampType").to_pylist() == [0] * 9


def test_split_responses_keep_aborted_state() -> None:
    first, second = b"".join(LOG[:3]), b"".join(LOG[3:])
    table = walk(PartitionRange("t", 0, 0, 14), [response(first, [(5, 3)]), response(second, [])])
    assert table.column("offset").to_pylist() == [0, 1, 2, 5, 6, 9, 10, 11, 12]


def test_clipped_to_the_range_and_partial_tail_ignored() -> None:
    blob = b"".join(LOG)
    table = walk(PartitionRange("t", 0, 1, 10), [response(blob + LOG[0][:20], [(5, 3)])])
    assert table.column("offset").to_pylist() == [1, 2, 5, 6, 9]


def test_log_append_time() -> None:
    table = walk(PartitionRange("t", 0, 0, 2), [response(batch(0, 2, timestamp_type=1), [])])
    assert table.column("timestampType").to_pylist() == [1, 1]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [T0 + 10_000] * 2
