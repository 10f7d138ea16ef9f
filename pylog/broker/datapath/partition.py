"""One partition replica on this broker: its log, idempotence state, wire cache, waiting fetches,
and its role (leader, follower or offline) as the metadata image assigns it.

Every write into the partition goes through this class, and only through two doors: a leader's
``append_as_leader`` (a producer's batch, a coordinator's batch
of an internal topic, a transaction marker; Kafka's appendRecordsToLeader with its AppendOrigin)
and a follower's ``append_as_follower`` (the leader's batches as they are). Both keep the log, the producer
state, the wire cache and the waiters in step. The maintenance thread's work on the log
(sealing, retention, compaction, flushes) is also a method here, so that what it changes
(cached wire bytes, forgotten producers) is changed by the owner.

Appends and reads run on the event loop: an append decodes one batch (C accelerator) and writes
it to the page cache. The partition log is thread-safe; ``lock`` guards this object's own state
(producer table, wire cache) against the maintenance thread, which never holds it across a
storage call.

As leader, followers' fetches report their log ends to a ``LeaderState`` (pylog.replication),
which moves the high watermark; waiters on it (acks=all produces, consumers long-polling) are
called when it advances. As follower, the fetcher appends the leader's batches with the
leader's offsets, epochs and producer metadata and sets the high watermark the leader reported.
Role changes come from the image (``become_leader`` / ``become_follower``).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pylog.protocol import records as rec
from pylog.protocol.errors import CorruptRecordBatch, ErrorCode, MalformedRecords, RecordBatchTooLarge
from pylog.storage import (
    BatchMeta,
    CompactionResult,
    InvalidAppend,
    InvalidRecord,
    LogConfig,
    PartitionLog,
    StorageError,
)
from pylog.storage.onecopy import INLINE, Rows
from pylog.storage.published_hw import PublishedHighWatermark
from pylog.storage.schema import metas_from_entries

from pylog.broker.datapath.batch_bytes import (
    InvalidRecordStructure,
    decode_at,
    encode_stored,
    rewrite_for_wire_cache,
    single_batch_header,
)
from pylog.broker.datapath.delayed import HwWaiter, Watchers
from pylog.broker.datapath.producer_state import AbortedTxn, ProducerStateTable, last_sequence
from pylog.broker.datapath.record_validation import RecordRules, validate_columns, validate_records
from pylog.broker.datapath.transactions import is_abort_marker, last_offset_of
from pylog.broker.datapath.wire_cache import WireBudget, WireBytes, WireCache
from pylog.model import COMPRESSION_MASK, CONTROL_MASK, LONG_MAX, TIMESTAMP_TYPE_MASK
from pylog.onecopy_kafka import rows_from_fetch, rows_from_kafka
from pylog.replication import LeaderState, leader_epoch_error

__all__ = ["AppendOrigin", "AppendResult", "Partition", "Role"]

log = logging.getLogger(__name__)

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "uncompressed": 0}


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


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # a replica here with no leader (or none known yet)


class Partition:
    """One replica of a partition on this broker: its log, producer state, wire cache, role, high
    watermark and waiters; the only writer of all of them."""

    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: Any,
        path: Path,
        configs: dict[str, str],
        *,
        now_ms: int,
        wire_cache_bytes: int,
        max_uncompressed_bytes: int,
        wire_budget: WireBudget | None = None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.path = path
        self.lock = threading.RLock()
        self.role = Role.OFFLINE
        self.local_id = -1
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.leader_state: LeaderState | None = None
        self._hw = 0  # the high watermark as a follower knows it (or as restored on start)
        self.wire = WireCache(wire_cache_bytes, wire_budget)
        self.producers = ProducerStateTable()
        self.max_uncompressed_bytes = max_uncompressed_bytes
        self.watchers = Watchers()  # waiting fetches, produces and DeleteRecords (delayed.py)
        self.deleted = False
        self.on_roll: Callable[[Partition], None] | None = None
        # the transaction coordinator's check of a transactional batch (error code, 0 = accept)
        self.txn_verifier: Callable[[Partition, int, int], int] | None = None
        self.log_config = LogConfig()
        self.apply_configs(configs)
        self.log = PartitionLog.open(path, self.log_config, now_ms=now_ms)
        self._attach_codecs()
        self._published_hw = PublishedHighWatermark(path)  # for readers of the data directory
        self._rebuild_producer_state()

    # --- configuration ----------------------------------------------------------------------

    def _attach_codecs(self) -> None:
        """The Kafka codec the log needs: format 1 sealed segments keep their batches' wire bytes
        (`wire_encoder`); format 2 builds Rows of a batch it is handed as Arrow (compaction of a
        batch that lost records, a topic's compression.type) with `rows_decoder`."""
        self.log.wire_encoder = encode_stored
        limit = self.max_uncompressed_bytes
        self.log.rows_decoder = lambda b, comp: rows_from_kafka(
            b, base_offset=int.from_bytes(b[:8], "big", signed=True), segment_compression=comp,
            max_uncompressed_bytes=limit)

    @property
    def one_copy(self) -> bool:
        """New batches are written in format 2 (`pylog.segment.format`, storage/FORMAT.md)."""
        return self.log.config.segment_format == 2

    def apply_configs(self, configs: dict[str, str]) -> None:
        try:
            log_config = LogConfig.from_kafka(configs)
        except ValueError as exc:
            log.error("%s-%d keeps its previous log config: %s", self.topic, self.index, exc)
            return
        self.configs = dict(configs)
        self.log_config = log_config
        self.max_message_bytes = log_config.max_message_bytes
        self.log_append_time = log_config.message_timestamp_type == "LogAppendTime"
        self.timestamp_after_max_ms = int(configs.get("message.timestamp.after.max.ms", LONG_MAX))
        self.timestamp_before_max_ms = int(configs.get("message.timestamp.before.max.ms", LONG_MAX))
        self.min_insync_replicas = int(configs.get("min.insync.replicas", 1))
        self.record_rules = RecordRules(
            compacted=log_config.compact,
            log_append_time=self.log_append_time,
            timestamp_before_max_ms=self.timestamp_before_max_ms,
            timestamp_after_max_ms=self.timestamp_after_max_ms,
        )
        self.target_codec = CODECS.get(configs.get("compression.type", "producer"))
        if hasattr(self, "log"):
            self.log.config = log_config

    # --- offsets ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on this broker's disk (above ``log_start_offset`` once the remote tier
        holds the oldest segments)."""
        return self.log.local_log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        leo = self.log.log_end_offset
        state = self.leader_state
        hw = state.high_watermark if state is not None else self._hw
        return min(hw, leo)

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def current_leader(self) -> tuple[int, int]:
        """(leader id, leader epoch) as this replica knows them, for answers that name the leader."""
        return self.leader_id, self.leader_epoch

    def restore_high_watermark(self, offset: int) -> None:
        """The checkpointed high watermark (replication-offset-checkpoint), on start."""
        self._hw = min(offset, self.log.log_end_offset)
        self._publish_high_watermark()

    def enough_replicas(self) -> bool:
        """acks=all may be accepted: the committed ISR has at least min.insync.replicas."""
        state = self.leader_state
        return state is not None and state.enough_replicas(self.min_insync_replicas)

    @property
    def last_stable_offset(self) -> int:
        first = self.producers.first_open_transaction_offset()
        return self.high_watermark if first is None else first

    def fetch_offsets(self) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start offset), as a fetch answer reports them."""
        hw = self.high_watermark
        first = self.producers.first_open_transaction_offset()
        return hw, hw if first is None else first, self.log.log_start_offset

    @property
    def latest_epoch(self) -> int:
        """The leader epoch of this replica's last batch (-1 when none)."""
        return self.log.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, where it ends in this log), or (-1, -1) when unknown."""
        return self.log.end_offset_for_epoch(epoch)

    def check_leader_epoch(self, current_leader_epoch: int, *, any_replica: bool = False) -> int:
        """Whether this replica may answer a request that names ``current_leader_epoch`` as the
        partition's leader (0), or the error: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH (``pylog.replication.epochs``). Fetch, ListOffsets and
        OffsetForLeaderEpoch all ask this; ``any_replica``: a follower may answer too (a
        consumer's Fetch v11+, KIP-392)."""
        if self.role is not Role.LEADER and not (any_replica and self.role is Role.FOLLOWER):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return leader_epoch_error(current_leader_epoch, self.leader_epoch)

    def offset_for_timestamp(self, timestamp: int, *, committed: bool) -> tuple[int, int] | None:
        """ListOffsets by time: (offset, timestamp) of the first record at or after ``timestamp``
        below the high watermark (the last stable offset when ``committed``), or None."""
        limit = self.last_stable_offset if committed else self.high_watermark
        return self.log.offset_for_timestamp(timestamp, max_offset=limit)

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP: (largest timestamp, offset of its first record), or None."""
        return self.log.max_timestamp_and_offset()

    # --- appends: the only two doors into the log --------------------------------------------

    def append_as_leader(
        self, records: memoryview | bytes | None, now_ms: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendResult:
        """Validate one batch (a produce partition's records, a coordinator's batch, a marker) and
        append it at the log end (Kafka's appendRecordsToLeader); Kafka errors as data."""
        if not records:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="no record batch")
        if not self.is_leader:
            return AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, message="not the leader of this partition")
        header = single_batch_header(records)
        if header is None:
            return _classify_records(records)
        view = records if type(records) is memoryview else memoryview(records)
        if header.size_in_bytes > self.max_message_bytes:
            return AppendResult(
                ErrorCode.MESSAGE_TOO_LARGE,
                message=f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes "
                f"{self.max_message_bytes}",
            )
        control = header.is_control
        if control and origin is AppendOrigin.CLIENT:
            return AppendResult(ErrorCode.INVALID_RECORD, message="clients may not write control batches")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            return AppendResult(ErrorCode.INVALID_RECORD, message="inconsistent record count")
        if header.is_transactional and not control:
            verify = self.txn_verifier
            error: int = ErrorCode.INVALID_TXN_STATE
            if verify is not None:
                error = verify(self, header.producer_id, header.producer_epoch)
            if error:
                return AppendResult(error, message=f"transactional batch refused: {ErrorCode(error).name}")
        pid = header.producer_id
        first_seq = header.base_sequence
        with self.lock:
            if self.deleted:
                return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if pid >= 0:
                last_seq = last_sequence(first_seq, header.last_offset_delta)
                check = self.producers.check(pid, header.producer_epoch, first_seq, last_seq)
                if check.error:
                    return AppendResult(check.error, message=check.message)
                if check.duplicate is not None:
                    dup = check.duplicate
                    return AppendResult(
                        0, dup.first_offset, -1, self.log.log_start_offset, last_offset=dup.last_offset
                    )
            leo = self.log.log_end_offset
            if self.one_copy and not control and self.target_codec in (None, header.compression):
                done = self._append_one_copy(view, header, leo, now_ms)
            else:
                done = self._append_decoded(view, header, leo, now_ms, control)
        result, rolled = done
        if result.error:
            return result
        if rolled and self.on_roll is not None:
            self.on_roll(self)
        self.watchers.log_grew()  # followers fetch it; consumers wait for the high watermark
        self.leader_appended()
        if control:
            self.wake()  # a marker moves the last stable offset: read_committed fetches look again
        return result

    def _append_one_copy(
        self, view: memoryview, header: Any, leo: int, now_ms: int
    ) -> tuple[AppendResult, bool]:
        """Format 2 leader append (under ``lock``): the producer's batch decompressed once into
        Rows (no Arrow table, never recompressed), validated on their columns, written once."""
        try:
            rows = rows_from_kafka(view, base_offset=leo, partition_leader_epoch=self.leader_epoch,
                                   segment_compression=self.log.config.segment_compression,
                                   max_uncompressed_bytes=self.max_uncompressed_bytes, header=header)
        except RecordBatchTooLarge as exc:
            return AppendResult(ErrorCode.MESSAGE_TOO_LARGE, message=str(exc)), False
        except MalformedRecords as exc:
            return AppendResult(ErrorCode.INVALID_RECORD,
                                message=f"Found invalid record structure: {exc}"), False
        except CorruptRecordBatch as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc)), False
        except ValueError as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc)), False
        if rows.num_rows != header.record_count:
            return AppendResult(ErrorCode.INVALID_RECORD, message="inconsistent record count"), False
        keyless = None if rows.key_valid is None else ~rows.key_valid
        refused = validate_columns(
            keyless,
            lambda: rows.timestamp,
            lambda: rows.offset,
            rows.num_rows,
            self.record_rules,
            now_ms=now_ms,
            producer_log_append_time=bool(header.attributes & TIMESTAMP_TYPE_MASK),
            max_timestamp=header.max_timestamp,
            offset_shift=header.base_offset - leo,
            topic_partition=f"{self.topic}-{self.index}",
        )
        if refused is not None:
            return AppendResult(refused.error, message=refused.message, record_errors=refused.records), False
        segments = self.log.segment_count
        try:
            stored = self.log.append_rows(rows, now_ms=now_ms, owned=True)  # rows_from_kafka's own
        except InvalidRecord as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc)), False
        except InvalidAppend as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc)), False
        except StorageError as exc:
            log.error("append to %s-%d failed: %s", self.topic, self.index, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc)), False
        base, last = stored.base_offset, stored.last_offset
        append_time = stored.max_timestamp if stored.attributes & TIMESTAMP_TYPE_MASK else -1
        if stored.attributes & COMPRESSION_MASK == header.compression:  # the producer's section
            self.wire.add(base, last, rewrite_for_wire_cache(view, base, self.leader_epoch, append_time))
        else:  # gzip / snappy stored in another codec: fetches read the log
            self.wire.clear()
        self.producers.replay(stored)
        rolled = self.log.segment_count != segments
        return AppendResult(0, base, append_time, self.log.log_start_offset, last_offset=last), rolled

    def _append_decoded(
        self, view: memoryview, header: Any, leo: int, now_ms: int, control: bool
    ) -> tuple[AppendResult, bool]:
        """Leader append (under ``lock``) of a batch decoded to Arrow: format 1, markers, and a
        topic whose compression.type is not the producer's."""
        pid, first_seq = header.producer_id, header.base_sequence
        try:
            table = decode_at(view, header, leo, self.max_uncompressed_bytes)
        except RecordBatchTooLarge as exc:
            return AppendResult(ErrorCode.MESSAGE_TOO_LARGE, message=str(exc)), False
        except CorruptRecordBatch as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc)), False
        except InvalidRecordStructure as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc)), False
        if not control:
            refused = validate_records(
                table,
                self.record_rules,
                now_ms=now_ms,
                producer_log_append_time=bool(header.attributes & TIMESTAMP_TYPE_MASK),
                max_timestamp=header.max_timestamp,
                offset_shift=header.base_offset - leo,
                topic_partition=f"{self.topic}-{self.index}",
            )
            if refused is not None:
                refusal = AppendResult(refused.error, message=refused.message, record_errors=refused.records)
                return refusal, False
        attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
        cacheable = True
        if not control and self.target_codec is not None and self.target_codec != header.compression:
            # compression.type other than "producer": fetches re-encode with the topic's codec
            attributes = (attributes & ~COMPRESSION_MASK) | self.target_codec
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
            partition_leader_epoch=self.leader_epoch,
        )
        segments = self.log.segment_count
        sent: list[WireBytes] = []

        def patched(stored: BatchMeta) -> WireBytes:
            # the producer's bytes with the stored offset, epoch (and append time): what the
            # wire cache serves and the active segment's `.wire` keeps
            at = stored.max_timestamp if stored.attributes & TIMESTAMP_TYPE_MASK else -1
            sent.append(rewrite_for_wire_cache(view, stored.base_offset, self.leader_epoch, at))
            return sent[0]

        try:
            wire_size = len(view) if cacheable else None  # fetch budgets count the bytes sent
            stored = self.log.append(table, meta, now_ms=now_ms, wire_size=wire_size,
                                     wire=patched if cacheable else None)
        except InvalidRecord as exc:
            return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc)), False
        except InvalidAppend as exc:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc)), False
        except StorageError as exc:
            log.error("append to %s-%d failed: %s", self.topic, self.index, exc)
            return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc)), False
        base = stored.base_offset
        last = stored.last_offset
        append_time = stored.max_timestamp if stored.attributes & TIMESTAMP_TYPE_MASK else -1
        if cacheable:
            self.wire.add(base, last, sent[0] if sent else patched(stored))
        else:
            self.wire.clear()
        self.producers.replay(stored, marker_aborted=_marker_aborted(table) if control else None)
        rolled = self.log.segment_count != segments
        return AppendResult(0, base, append_time, self.log.log_start_offset, last_offset=last), rolled

    def append_as_follower(self, records: memoryview | bytes, now_ms: int) -> int:
        """Append the leader's batches as they are (offsets, epochs, producer metadata); batches
        already held are skipped. Returns how many batches were appended; raises
        CorruptRecordBatch (nothing after the bad batch is appended)."""
        view = records if type(records) is memoryview else memoryview(records)
        if self.one_copy:
            return self._append_rows_as_follower(view, now_ms)
        appended = 0
        for header, batch in rec.iter_batches(view):
            if header.base_offset + header.last_offset_delta < self.log.log_end_offset:
                continue
            table = decode_at(batch, header, header.base_offset, self.max_uncompressed_bytes)
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
            with self.lock:
                if self.deleted:
                    return appended
                segments = self.log.segment_count
                stored = self.log.append(
                    table, meta, now_ms=now_ms, base_offset=header.base_offset,
                    wire_size=header.size_in_bytes, wire=_as_is(batch),
                )
                control = bool(stored.attributes & CONTROL_MASK)
                self.producers.replay(stored, marker_aborted=_marker_aborted(table) if control else None)
                rolled = self.log.segment_count != segments
            if rolled and self.on_roll is not None:
                self.on_roll(self)
            appended += 1
        return appended

    def _append_rows_as_follower(self, view: memoryview, now_ms: int) -> int:
        """Format 2: the leader's batches stored as they came (each decompressed once to find its
        records, never recompressed), walked and written together (one C walk and one Arrow
        message per run of about 1 MiB, not one per batch). A corrupt batch raises
        CorruptRecordBatch after the batches before it are appended. Returns how many batches
        were appended."""
        runs, error = rows_from_fetch(view, log_end_offset=self.log.log_end_offset,
                                      segment_compression=self.log.config.segment_compression,
                                      max_uncompressed_bytes=self.max_uncompressed_bytes)
        appended = 0
        if runs:
            with self.lock:
                if self.deleted:
                    return 0
                segments = self.log.segment_count
                stored = self.log.append_replicated_rows([r.rows for r in runs], now_ms=now_ms)
                batches = [(header, batch, run.rows) for run in runs for header, batch in run.batches]
                for meta, (header, batch, rows) in zip(stored, batches):
                    marker = None
                    if header.is_control:  # a control batch is a run of its own
                        marker = _rows_marker_aborted(rows, batch, header, self.max_uncompressed_bytes)
                    self.producers.replay(meta, marker_aborted=marker)
                appended = len(stored)
                rolled = self.log.segment_count != segments
            if rolled and self.on_roll is not None:
                self.on_roll(self)
        if error is not None:
            raise error
        return appended

    # --- fetch ------------------------------------------------------------------------------

    def read_wire(
        self, offset: int, max_bytes: int, max_offset: int, *, min_one: bool = True
    ) -> list[WireBytes]:
        """RecordBatch v2 bytes from the batch containing ``offset``, wholly below ``max_offset``, at
        most ``max_bytes`` of them; with ``min_one`` the first batch comes even if it is larger."""
        if offset >= max_offset:
            return []
        cached = self.wire.get(offset, max_bytes, max_offset)
        if cached is not None:
            if not min_one and cached and len(cached[0]) > max_bytes:
                return []
            return cached
        out: list[WireBytes] = []
        total = 0
        # history: sealed segments' `.wire` slices as they are, other batches encoded from Arrow
        for b in self.log.read_wire(offset, max_bytes, max_offset=max_offset, min_one=min_one):
            data = b if isinstance(b, memoryview) else encode_stored(b.meta, b.records)
            total += len(data)
            if total > max_bytes and (out or not min_one):
                break  # stored sizes are estimates when the bytes were re-encoded
            out.append(data)
        return out

    def aborted_transactions(self, fetch_offset: int, batches: Sequence[WireBytes]) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch from ``fetch_offset`` returning
        ``batches`` (wire bytes) must list: those overlapping the returned range."""
        if not self.producers.aborted or not batches:
            return []
        return self.producers.aborted_transactions(fetch_offset, last_offset_of(batches[-1]) + 1)

    def active_producers(self) -> list[tuple[int, Any]]:
        """(producer id, entry) of every producer this partition remembers (DescribeProducers)."""
        with self.lock:
            return list(self.producers.producers.items())

    # --- waiting requests --------------------------------------------------------------------

    def wake(self) -> None:
        """Something changed (truncation, deletion, a role): let every waiting fetch look again."""
        self.watchers.wake_all()

    def log_start_moved(self) -> None:
        """The leader moved its log start offset (on the event loop): followers' waiting fetches
        answer now, so they learn it without waiting for new records."""
        self.watchers.log_grew()

    def low_watermark(self, live_brokers: Collection[int]) -> int:
        """Kafka's low watermark (see ``LeaderState.low_watermark``); -1 unless leading."""
        state = self.leader_state
        if state is None:
            return -1
        return state.low_watermark(self.log.log_start_offset, live_brokers)

    # --- roles (on the event loop, driven by the metadata image) ------------------------------

    def become_leader(
        self,
        local_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        now_ms: int,
    ) -> bool:
        """Lead from ``leader_epoch`` on; True if this is a new leadership (not just a new ISR)."""
        self.local_id = local_id
        state = self.leader_state
        if self.role is Role.LEADER and state is not None and leader_epoch == self.leader_epoch:
            state.update_partition(replicas, isr, partition_epoch)
            self.replicas, self.isr, self.partition_epoch = state.replicas, state.isr, state.partition_epoch
            self._hw_advanced(state.maybe_advance_high_watermark(self.log.log_end_offset))
            return False
        leo = self.log.log_end_offset
        with self.lock:
            self.log.assign_leader_epoch(leader_epoch, leo)
        self.role = Role.LEADER
        self.leader_id = local_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas, self.isr = replicas, isr
        self.leader_state = LeaderState(
            local_id,
            replicas,
            isr,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            epoch_start_offset=leo,
            high_watermark=min(self._hw, leo),
            now_ms=now_ms,
        )
        self._hw_advanced(self.leader_state.maybe_advance_high_watermark(leo))
        self.wake()
        return True

    def become_follower(
        self,
        local_id: int,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
    ) -> bool:
        """Follow ``leader_id`` (-1: offline, no leader); True if the leader or epoch changed."""
        self.local_id = local_id
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch or self.role is Role.LEADER
        if self.leader_state is not None:
            self._hw = self.leader_state.high_watermark
            self.leader_state = None
        self.role = Role.FOLLOWER if leader_id >= 0 else Role.OFFLINE
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas, self.isr = replicas, isr
        if changed:
            self.watchers.fail_replication(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.wake()
        return changed

    # --- as leader ----------------------------------------------------------------------------

    def leader_appended(self) -> None:
        """A batch was appended here as leader: a leader alone in its ISR commits at once."""
        state = self.leader_state
        if state is not None:
            self._hw_advanced(state.maybe_advance_high_watermark(self.log.log_end_offset))

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1
    ) -> None:
        """A follower fetched from ``fetch_offset`` (its log end) with ``log_start_offset``: the
        high watermark, and the low watermark, may move."""
        state = self.leader_state
        if state is None:
            return
        leo = self.log.log_end_offset
        follower = state.followers.get(replica_id)
        old_start = follower.log_start_offset if follower is not None else -1
        if state.on_follower_fetch(replica_id, fetch_offset, leo, now_ms, log_start_offset):
            self._hw_advanced(state.maybe_advance_high_watermark(leo))
        if log_start_offset != old_start:
            self.watchers.log_start_reported()

    def isr_changed(self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller accepted an ISR change (AlterPartition's answer)."""
        state = self.leader_state
        if state is None or leader_epoch != self.leader_epoch:
            return
        state.update_partition(self.replicas, isr, partition_epoch)
        self.isr, self.partition_epoch = state.isr, state.partition_epoch
        self._hw_advanced(state.maybe_advance_high_watermark(self.log.log_end_offset))

    def isr_to_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR with ``replica_id`` added, if it caught up and no change is in flight."""
        state = self.leader_state
        if state is None or state.pending_isr is not None:
            return None
        return state.isr_expand(replica_id)

    def isr_to_shrink(self, now_ms: int, lag_time_max_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers out of sync for ``lag_time_max_ms``, or None."""
        state = self.leader_state
        return state.isr_shrink(now_ms, lag_time_max_ms) if state is not None else None

    def propose_isr(self, new_isr: tuple[int, ...]) -> bool:
        """Record ``new_isr`` as the pending ISR change (the high watermark waits for its new
        members too); False unless leading."""
        state = self.leader_state
        if state is None:
            return False
        state.propose(new_isr)
        return True

    def leader_epochs(self) -> tuple[int, int] | None:
        """(leader epoch, partition epoch) an AlterPartition carries; None unless leading."""
        state = self.leader_state
        return None if state is None else (state.leader_epoch, state.partition_epoch)

    def isr_change_failed(self, *, stale: bool = False, sent_epoch: int | None = None) -> None:
        """The controller refused the pending ISR change (``stale``: as outdated; ``sent_epoch``:
        the partition epoch it carried), or it did not arrive."""
        state = self.leader_state
        if state is not None:
            state.isr_change_failed(stale=stale, sent_epoch=sent_epoch)
            # the high watermark waited for the refused ISR too: recompute it now, or produces
            # waiting on it stay stuck until the next append or follower progress
            self._hw_advanced(state.maybe_advance_high_watermark(self.log.log_end_offset))

    def add_hw_waiter(self, offset: int, callback: HwWaiter) -> None:
        """Call ``callback(0)`` once the high watermark is past ``offset`` (now, if it is), or
        ``callback(error)`` when this replica stops leading."""
        if self.high_watermark > offset:
            callback(0)
        elif self.role is not Role.LEADER:
            callback(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            self.watchers.add_replication(offset, callback)

    def _hw_advanced(self, advanced: bool) -> None:
        if advanced:  # acks=all produces may be done, consumers long-polling may see more
            self._publish_high_watermark()
            self.watchers.high_watermark_moved(self.high_watermark)

    def _publish_high_watermark(self) -> None:
        """Readers of the data directory see the high watermark before anyone is told of it."""
        self._published_hw.publish(self.high_watermark)

    # --- as follower --------------------------------------------------------------------------

    def follower_high_watermark(self, leader_high_watermark: int) -> None:
        """The leader reported its high watermark: ours is that, within our log."""
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw != self._hw:
            self._hw = hw
            self._publish_high_watermark()
            self.watchers.high_watermark_moved(hw)

    def truncate_to(self, offset: int) -> None:
        """Cut the log at ``offset`` (a follower meeting a new leader); the producer state is
        rebuilt from what is left and cached wire bytes are dropped."""
        with self.lock:
            if offset >= self.log.log_end_offset:
                self.log.truncate_to(offset)  # no record goes, an empty epoch at the end may
                return
            self.log.truncate_to(offset)
            self.wire.clear()
            self._rebuild_producer_state()
            self._hw = min(self._hw, offset)
            self._publish_high_watermark()
        log.info("truncated %s-%d to offset %d", self.topic, self.index, offset)
        self.wake()

    def truncate_fully_and_start_at(self, offset: int, *, log_start_offset: int | None = None) -> None:
        """The leader's log starts past ours: start over, empty, at ``offset`` (the leader's local
        log start when the remote tier holds the offsets from ``log_start_offset`` below it)."""
        with self.lock:
            self.log.truncate_fully_and_start_at(offset, log_start_offset=log_start_offset)
            self.wire.clear()
            self.producers = ProducerStateTable()
            self._hw = offset
            self._publish_high_watermark()
        log.info("%s-%d starts over at the leader's log start offset %d", self.topic, self.index, offset)
        self.wake()

    def _rebuild_producer_state(self) -> None:
        """Replay the batch metadata of the log into a new idempotence table: open transactions
        (the last stable offset) and the aborted-transactions index come back too; only the records
        of markers ending an open transaction are read."""
        producers = ProducerStateTable()
        entries = self.log.batch_metadata()
        for m in metas_from_entries(entries[entries["producer_id"] >= 0]):
            aborted = None
            if m.attributes & CONTROL_MASK:
                open_txn = m.producer_id in producers.open_transactions
                aborted = open_txn and is_abort_marker(self.log, m.base_offset)
            producers.replay(m, marker_aborted=aborted)
        self.producers = producers

    # --- log start changes and upkeep (any thread) --------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset``; the new log start offset."""
        start = self.log.delete_records_before(offset)
        self._forget_below(start)
        return start

    def delete_local_segments(self, up_to: int) -> int:
        """The remote tier holds the offsets below ``up_to``: delete the local segments wholly
        below it; the log start offset stays (only the local log start moves)."""
        return self.log.delete_local_segments(up_to)

    def advance_log_start_offset(self, offset: int) -> int:
        """Remote retention expired the offsets below ``offset``: the log start offset moves there
        (never back, never past the log end); the new log start offset."""
        start = self.log.delete_records_before(min(offset, self.log.log_end_offset))
        self._forget_below(start)
        return start

    def _forget_below(self, log_start_offset: int) -> None:
        with self.lock:
            self.producers.truncate(log_start_offset)

    def seal_rolled_segments(self) -> int:
        """Rewrite rolled segments as sealed IPC files (the maintenance thread)."""
        return self.log.seal_pending()

    def upgrade_segments(self, limit: int = 1) -> int:
        """Under format 2, rewrite up to ``limit`` sealed format 1 segments as format 2 (the
        maintenance thread); offsets and bytes served stay the same. Returns segments rewritten."""
        return self.log.upgrade_format(limit) if self.one_copy else 0

    def apply_retention(self, now_ms: int, producer_expiration_ms: int) -> None:
        """Delete segments past retention (never above the high watermark) and forget what they
        held; expire producers idle longer than ``producer.id.expiration.ms``."""
        if self.log.apply_retention(now_ms, max_offset=self.high_watermark):
            self._forget_below(self.log.log_start_offset)
        with self.lock:
            self.producers.expire(now_ms, producer_expiration_ms)

    def compact(self, now_ms: int) -> CompactionResult:
        """Log compaction below the last stable offset, when due; cached wire bytes that may
        predate a rewrite go, and aborted transactions without records are forgotten."""
        with self.lock:
            stable = self.last_stable_offset
        result = self.log.compact(now_ms, max_offset=stable)
        if result.segments or result.cleared_aborts:
            with self.lock:
                if result.segments:
                    self.wire.clear()
                self.producers.forget_aborted(result.cleared_aborts)
        return result

    def flush_if_due(self, now_ms: int) -> bool:
        """fsync when ``flush.ms`` has passed since the last flush."""
        return self.log.maybe_flush(now_ms)

    def delete(self) -> None:
        """This replica is removed from the broker: appends are refused from now on, the log is
        closed unflushed (its directory goes next) and waiting requests look again."""
        with self.lock:
            self.deleted = True
            self.close(flush=False)
        self.wake()

    def relocate(self, path: Path, now_ms: int) -> None:
        """Serve from ``path``, a complete copy of the closed log in another log directory
        (AlterReplicaLogDirs); offsets, producers and cached wire bytes are unchanged."""
        with self.lock:
            self.log = PartitionLog.open(path, self.log_config, now_ms=now_ms)
            self._attach_codecs()
            self.path = path
            self._published_hw.close()
            self._published_hw = PublishedHighWatermark(path)
            self._publish_high_watermark()

    def close(self, *, flush: bool = True) -> None:
        self.wire.clear()  # give its share of the broker's wire budget back
        if flush:
            self.log.flush()
        self.log.close()
        self._published_hw.close()


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


def _rows_marker_aborted(rows: Rows, batch: memoryview, header: Any, limit: int) -> bool:
    """Whether a control batch held as Rows is an ABORT marker: its key and value are short
    enough to sit in their views (a longer one is decoded)."""
    k, v = rows.key[0], rows.value[0]
    if rows.key_valid is None and rows.value_valid is None and k[0] <= INLINE and v[0] <= INLINE:
        key, value = k.tobytes()[4:4 + int(k[0])], v.tobytes()[4:4 + int(v[0])]
        return rec.parse_control_record(key, value).is_abort
    return _marker_aborted(decode_at(batch, header, header.base_offset, limit))


def _marker_aborted(records: Any) -> bool:
    """Whether a control batch's (one) record is an ABORT marker."""
    key = records.column("key")[0].as_py()
    value = records.column("value")[0].as_py()
    return rec.parse_control_record(key, value).is_abort
