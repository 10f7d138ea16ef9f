"""The two doors through which records enter a partition replica: a leader's ``append_as_leader``
(a producer's batch, a coordinator's batch, a transaction marker: Kafka's appendRecordsToLeader
with its AppendOrigin) and a follower's ``append_as_follower`` (the leader's batches as they are).

Both keep the log, the producer state, the wire cache (and the active segment's `.wire`) and the
waiters in step under the partition's lock. A ``Partition`` owns
one ``PartitionAppends`` and delegates both to it.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pylog.protocol import records as rec
from pylog.protocol.errors import CorruptRecordBatch, ErrorCode, RecordBatchTooLarge
from pylog.storage import BatchMeta, InvalidAppend, InvalidRecord, StorageError

from pylog.broker.datapath.batch_bytes import (
    InvalidRecordStructure,
    decode_at,
    rewrite_for_wire_cache,
    single_batch_header,
)
from pylog.broker.datapath.producer_state import last_sequence
from pylog.broker.datapath.record_validation import validate_records
from pylog.broker.datapath.wire_cache import WireBytes
from pylog.model import COMPRESSION_MASK, CONTROL_MASK, TIMESTAMP_TYPE_MASK

if TYPE_CHECKING:
    from pylog.broker.datapath.partition import Partition

log = logging.getLogger(__name__)


class AppendOrigin(enum.Enum):
    """Who appends as leader (Kafka's AppendOrigin): a client may not write control batches; a
    coordinator writes its internal topics and the transaction markers."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(slots=True)
class AppendResult:
    error: int = 0
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)  # (batch index, message)
    last_offset: int = -1  # of the appended (or duplicate) batch: acks=all waits for it
    current_leader: tuple[int, int] | None = None  # (leader id, epoch) with NOT_LEADER_OR_FOLLOWER


class PartitionAppends:
    """The append half of a ``Partition`` (see the module docstring): the partition owns one and
    delegates ``append_as_leader`` / ``append_as_follower`` to it. It works on the partition's
    log, producer table, wire cache and waiters under the partition's lock."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition

    # --- appends as leader --------------------------------------------------------------------

    def append_as_leader(
        self, records: memoryview | bytes | None, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendResult:
        """Validate one batch (a produce partition's records, a coordinator's batch, a marker) and
        append it at the log end; Kafka errors as data."""
        p = self.partition
        if not records:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="no record batch")
        if not p.is_leader:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, message="not the leader of this partition")
        header = single_batch_header(records)
        if header is None:
            return _classify_records(records)
        view = records if type(records) is memoryview else memoryview(records)
        if header.size_in_bytes > p.max_message_bytes:
            return AppendResult(
                ErrorCode.MESSAGE_TOO_LARGE,
                message=f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
                f"{p.max_message_bytes}",
            )
        control = header.is_control
        if control and origin is AppendOrigin.CLIENT:
            return AppendResult(ErrorCode.INVALID_RECORD, message="clients may not write control batches")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            return AppendResult(ErrorCode.INVALID_RECORD, message="inconsistent record count")
        if header.is_transactional and not control:
            verify = p.txn_verifier
            error: int = ErrorCode.INVALID_TXN_STATE
            if verify is not None:
                error = verify(p, header.producer_id, header.producer_epoch)
            if error:
                return AppendResult(error, message=f"transactional batch refused: {ErrorCode(error).name}")
        pid = header.producer_id
        first_seq = header.base_sequence
        with p.lock:
            if p.deleted:
                return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if pid >= 0:
                last_seq = last_sequence(first_seq, header.last_offset_delta)
                check = p.producers.check(pid, header.producer_epoch, first_seq, last_seq)
                if check.error:
                    return AppendResult(check.error, message=check.message)
                if check.duplicate is not None:
                    dup = check.duplicate
                    return AppendResult(
                        0, dup.first_offset, -1, p.log.log_start_offset, last_offset=dup.last_offset
                    )
            leo = p.log.log_end_offset
            try:
                table = decode_at(view, header, leo, p.max_uncompressed_bytes)
            except RecordBatchTooLarge as exc:
                return AppendResult(ErrorCode.MESSAGE_TOO_LARGE, message=str(exc))
            except CorruptRecordBatch as exc:
                return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
            except InvalidRecordStructure as exc:
                return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
            if not control:
                refused = validate_records(
                    table,
                    p.record_rules,
                    now_ms=now_ms,
                    producer_log_append_time=bool(header.attributes & TIMESTAMP_TYPE_MASK),
                    max_timestamp=header.max_timestamp,
                    offset_shift=header.base_offset - leo,
                    topic_partition=f"{p.topic}-{p.index}",
                )
                if refused is not None:
                    return AppendResult(refused.error, message=refused.message, record_errors=refused.records)
            attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
            cacheable = True
            if not control and p.target_codec is not None and p.target_codec != header.compression:
                # compression.type other than "producer": fetches re-encode with the topic's codec
                attributes = (attributes & ~COMPRESSION_MASK) | p.target_codec
                cacheable = False
            meta = BatchMeta(
                base_offset=leo,
                last_offset_delta=header.last_offset_delta,
                record_count=header.record_count,
                base_timestamp=header.base_timestamp,
                max_timestamp=header.max_timestamp,
                producer_id=pid,
                producer_epoch=header.producer_epoch,
                base_sequence=first_seq,
                attributes=attributes,
                partition_leader_epoch=p.leader_epoch,
            )
            segments = p.log.segment_count
            sent: list[WireBytes] = []

            def patched(stored: BatchMeta) -> WireBytes:
                # the producer's bytes with the stored offset, epoch (and append time): what the
                # wire cache serves and the active segment's `.wire` keeps
                at = stored.max_timestamp if stored.attributes & TIMESTAMP_TYPE_MASK else -1
                sent.append(rewrite_for_wire_cache(view, stored.base_offset, p.leader_epoch, at))
                return sent[0]

            try:
                wire_size = len(view) if cacheable else None  # fetch budgets count the bytes sent
                stored = p.log.append(table, meta, now_ms=now_ms, wire_size=wire_size,
                                         wire=patched if cacheable else None)
            except InvalidRecord as exc:
                return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
            except InvalidAppend as exc:
                return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
            except StorageError as exc:
                log.error("append to %s-%d failed: %s", p.topic, p.index, exc)
                return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc))
            base = stored.base_offset
            last = stored.last_offset
            append_time = stored.max_timestamp if stored.attributes & TIMESTAMP_TYPE_MASK else -1
            if cacheable:
                p.wire.add(base, last, sent[0] if sent else patched(stored))
            else:
                p.wire.clear()
            p.producers.replay(stored, marker_aborted=_marker_aborted(table) if control else None)
            log_start = p.log.log_start_offset
            rolled = p.log.segment_count != segments
        if rolled and p.on_roll is not None:
            p.on_roll(p)
        p.watchers.log_grew()  # followers fetch it; consumers wait for the high watermark
        p.leader_appended()
        if control:
            p.wake()  # a marker moves the last stable offset: read_committed fetches look again
        return AppendResult(0, base, append_time, log_start, last_offset=last)

    # --- as follower --------------------------------------------------------------------------

    def append_as_follower(self, records: memoryview | bytes, now_ms: int) -> int:
        """Append the leader's batches as they are (offsets, epochs, producer metadata); batches
        already held are skipped. Returns how many batches were appended; raises
        CorruptRecordBatch (nothing after the bad batch is appended)."""
        p = self.partition
        view = records if type(records) is memoryview else memoryview(records)
        appended = 0
        for header, batch in rec.iter_batches(view):
            if header.base_offset + header.last_offset_delta < p.log.log_end_offset:
                continue
            table = decode_at(batch, header, header.base_offset, p.max_uncompressed_bytes)
            meta = BatchMeta(
                base_offset=header.base_offset,
                last_offset_delta=header.last_offset_delta,
                record_count=header.record_count,
                base_timestamp=header.base_timestamp,
                max_timestamp=header.max_timestamp,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                attributes=header.attributes,
                partition_leader_epoch=header.partition_leader_epoch,
            )
            with p.lock:
                if p.deleted:
                    return appended
                segments = p.log.segment_count
                stored = p.log.append(
                    table, meta, now_ms=now_ms, base_offset=header.base_offset,
                    wire_size=header.size_in_bytes, wire=_as_is(batch),
                )
                control = bool(stored.attributes & CONTROL_MASK)
                p.producers.replay(stored, marker_aborted=_marker_aborted(table) if control else None)
                rolled = p.log.segment_count != segments
            if rolled and p.on_roll is not None:
                p.on_roll(p)
            appended += 1
        return appended


def _as_is(batch: memoryview) -> Callable[[Any], memoryview]:
    """A follower keeps the leader's bytes in the active segment's `.wire` as they are."""
    return lambda _stored: batch


def _classify_records(records: memoryview | bytes) -> AppendResult:
    """Why ``records`` are not exactly one batch: broken, truncated, or several."""
    try:
        batches = list(rec.iter_batches(records))
    except CorruptRecordBatch as exc:
        return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
    if not batches or sum(h.size_in_bytes for h, _ in batches) != len(records):
        return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="truncated record batch")
    return AppendResult(
        ErrorCode.INVALID_RECORD, message="a produce request must carry exactly one record batch"
    )


def _marker_aborted(records: Any) -> bool:
    """Whether a control batch's (one) record is an ABORT marker."""
    key = records.column("key")[0].as_py()
    value = records.column("value")[0].as_py()
    return rec.parse_control_record(key, value).is_abort
