"""Kafka's per-record produce checks (LogValidator), found column-wise on a decoded batch.

A produced batch is appended whole or not at all. When records break a per-record rule, Kafka
(KIP-467) refuses the batch and names each offending record by its index in the batch, so a
client fails exactly those records and may send the others again. The rules, in Kafka's order
(a record gets at most one error, its key's first):

- a compacted topic takes only records with a key (INVALID_RECORD);
- under CreateTime, a record's timestamp (unless -1, "none") must lie within
  [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]
  (INVALID_TIMESTAMP);
- a producer may not mark its batch LogAppendTime (INVALID_TIMESTAMP).

The batch error is INVALID_TIMESTAMP if any record has a timestamp error, else INVALID_RECORD.
The offending rows come from pyarrow / numpy masks over the key and timestamp columns; Python
only touches the offenders, to word their messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pylog.protocol.errors import ErrorCode

from pylog.model import LONG_MAX, LONG_MIN

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class RecordErrors:
    """Why a batch was refused: the batch's error code and message, and (index, message) per record."""

    error: int
    message: str
    records: list[tuple[int, str]]


@dataclass(frozen=True, slots=True)
class RecordRules:
    """The topic settings the per-record checks read."""

    compacted: bool
    log_append_time: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int


def validate_records(
    records: pa.RecordBatch,
    rules: RecordRules,
    *,
    now_ms: int,
    producer_log_append_time: bool,
    max_timestamp: int,
    offset_shift: int,
    topic_partition: str,
) -> RecordErrors | None:
    """The per-record errors of a decoded batch (RECORD_SCHEMA rows in batch order), or None.

    ``producer_log_append_time`` and ``max_timestamp`` come from the producer's batch header: a
    LogAppendTime batch's records all carry its max timestamp, as Kafka reads them. Adding
    ``offset_shift`` to a row's offset gives the offset the producer wrote (messages quote it).
    """
    col = records.column(1)
    return validate_columns(
        _keyless(records) if rules.compacted else None,
        lambda: _int64(col) if col.null_count == 0 else np.asarray(
            col.cast(pa.int64()).fill_null(NO_TIMESTAMP).to_numpy(), dtype=np.int64),
        lambda: _int64(records.column(0)),
        records.num_rows,
        rules,
        now_ms=now_ms,
        producer_log_append_time=producer_log_append_time,
        max_timestamp=max_timestamp,
        offset_shift=offset_shift,
        topic_partition=topic_partition,
    )


def validate_columns(
    keyless: np.ndarray | None,
    timestamps: Callable[[], np.ndarray],
    offsets: Callable[[], np.ndarray],
    n: int,
    rules: RecordRules,
    *,
    now_ms: int,
    producer_log_append_time: bool,
    max_timestamp: int,
    offset_shift: int,
    topic_partition: str,
) -> RecordErrors | None:
    """``validate_records`` over the columns it reads: the mask of records without a key (None
    when every record has one), and, asked for only when needed, the records' timestamps (int64,
    -1 for none) and offsets. A format 2 append passes its Rows' columns (no Arrow table)."""
    bad_key = keyless if rules.compacted and keyless is not None and keyless.any() else None
    bad_ts, ts = _timestamp_errors(n, timestamps, rules, now_ms, producer_log_append_time, max_timestamp)
    if bad_key is None and bad_ts is None:
        return None
    if bad_key is None:
        bad_key = np.zeros(n, dtype=bool)
    if bad_ts is None:
        bad_ts = np.zeros(n, dtype=bool)
    bad_ts &= ~bad_key  # one error per record, the key's first
    key_message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    errors: dict[int, str] = dict.fromkeys(np.flatnonzero(bad_key).tolist(), key_message)
    ts_rows = np.flatnonzero(bad_ts)
    if len(ts_rows):
        if ts is None:  # the producer marked its batch LogAppendTime
            detail = "Producer should not set timestamp type to LogAppendTime."
            errors.update((i, f"Invalid timestamp type in record {i}. {detail}") for i in ts_rows.tolist())
        else:
            lo = max(now_ms - rules.timestamp_before_max_ms, LONG_MIN)
            hi = min(now_ms + rules.timestamp_after_max_ms, LONG_MAX)
            offs = offsets()
            for i in ts_rows.tolist():
                errors[i] = (
                    f"Timestamp {int(ts[i])} of message with offset {int(offs[i]) + offset_shift} is out "
                    f"of range. The timestamp should be within [{lo}, {hi}]"
                )
    listed = sorted(errors.items())
    if len(ts_rows):
        message = "One or more records have been rejected due to invalid timestamp"
        return RecordErrors(ErrorCode.INVALID_TIMESTAMP, message, listed)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in listed[:3])
    return RecordErrors(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(listed)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        listed,
    )


def _keyless(records: pa.RecordBatch) -> np.ndarray | None:
    keys = records.column(2)
    if keys.null_count == 0:
        return None
    return np.asarray(keys.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _timestamp_errors(
    n: int,
    timestamps: Callable[[], np.ndarray],
    rules: RecordRules,
    now_ms: int,
    producer_log_append_time: bool,
    max_timestamp: int,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(mask of records with a timestamp error or None, their timestamps as Kafka reads them)."""
    if producer_log_append_time:
        # Kafka reads every record of a LogAppendTime batch at the batch's max timestamp.
        if rules.log_append_time or max_timestamp == NO_TIMESTAMP:
            return np.ones(n, dtype=bool), None
        ts = np.full(n, max_timestamp, dtype=np.int64)
    elif rules.log_append_time:
        return None, None
    else:
        ts = timestamps()
    before, after = rules.timestamp_before_max_ms, rules.timestamp_after_max_ms
    check_low, check_high = before < LONG_MAX, after < LONG_MAX
    if n == 0 or not (check_low or check_high):
        return None, ts
    lo = max(now_ms - before, LONG_MIN)
    hi = min(now_ms + after, LONG_MAX)
    if (not check_low or int(ts.min()) >= lo) and (not check_high or int(ts.max()) <= hi):
        return None, ts  # the common case: a min / max pass, no mask
    bad = ((ts < lo) | (ts > hi)) & (ts != NO_TIMESTAMP)
    return (bad if bad.any() else None), ts


def _int64(col: pa.Array) -> np.ndarray:
    """The values of an int64-backed column without a copy."""
    return np.frombuffer(col.buffers()[1], np.int64, len(col), col.offset * 8)
