"""One partition replica on this broker: its log, idempotence state, wire cache, waiting fetches,
and its role (leader, follower or offline) as the metadata image assigns it.

Appends and reads run on the event loop: an append decodes one batch (C accelerator) and writes
it to the page cache. The partition log is thread-safe; ``lock`` guards this object's own state
(producer table, wire cache) against the maintenance thread, which never holds it across a
storage call.

As leader, clients append here and followers' fetches report their log ends to a
``LeaderState`` (pylog.replication), which moves the high watermark; waiters on it (acks=all
produces, consumers long-polling) are called when it advances. As follower, the fetcher
appends the leader's batches with the leader's offsets, epochs and producer metadata
(``append_as_follower``) and sets the high watermark the leader reported. Role changes come
from the image (``become_leader`` / ``become_follower`` / ``become_offline``).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pylog.protocol import records as rec
from pylog.protocol.errors import CorruptRecordBatch, ErrorCode, RecordBatchTooLarge
from pylog.storage import BatchMeta, InvalidAppend, InvalidRecord, LogConfig, PartitionLog, StorageError
from pylog.storage.schema import metas_from_entries

from pylog.broker.batch_bytes import (
    TIMESTAMP_TYPE_MASK,
    InvalidRecordStructure,
    decode_at,
    encode_stored,
    rewrite_for_wire_cache,
    single_batch_header,
)
from pylog.broker.producer_state import ProducerStateTable, last_sequence
from pylog.broker.record_validation import RecordRules, validate_records
from pylog.broker.transactions import is_abort_marker
from pylog.broker.wire_cache import WireBudget, WireBytes, WireCache
from pylog.replication import LeaderState

log = logging.getLogger(__name__)

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4, "uncompressed": 0}
LONG_MAX = 2**63 - 1


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # a replica here with no leader (or none known yet)


HwWaiter = Callable[[int], None]  # called with an error code (0: the high watermark passed)


@dataclass(slots=True)
class AppendResult:
    error: int = 0
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)  # (batch index, message)
    last_offset: int = -1  # of the appended (or duplicate) batch: acks=all waits for it


class Partition:
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
        self._hw_waiters: list[tuple[int, HwWaiter]] = []  # (offset to pass, callback), as leader
        self.wire = WireCache(wire_cache_bytes, wire_budget)
        self.producers = ProducerStateTable()
        self.max_uncompressed_bytes = max_uncompressed_bytes
        self._waiters: list[Callable[[], None]] = []  # fetches reading to the high watermark
        self._log_end_waiters: list[Callable[[], None]] = []  # followers' fetches, to the log end
        self._log_start_waiters: list[Callable[[], None]] = []  # DeleteRecords, for the low watermark
        self.deleted = False
        self.on_roll: Callable[[Partition], None] | None = None
        # the transaction coordinator's check of a transactional batch (error code, 0 = accept)
        self.txn_verifier: Callable[[Partition, int, int], int] | None = None
        self.log_config = LogConfig()
        self.apply_configs(configs)
        self.log = PartitionLog.open(path, self.log_config, now_ms=now_ms)

    # --- configuration ----------------------------------------------------------------------

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

    def restore_high_watermark(self, offset: int) -> None:
        """The checkpointed high watermark (replication-offset-checkpoint), on start."""
        self._hw = min(offset, self.log.log_end_offset)

    def enough_replicas(self) -> bool:
        """acks=all may be accepted: the committed ISR has at least min.insync.replicas."""
        state = self.leader_state
        return state is not None and state.enough_replicas(self.min_insync_replicas)

    @property
    def last_stable_offset(self) -> int:
        first = self.producers.first_open_transaction_offset()
        return self.high_watermark if first is None else first

    # --- produce ----------------------------------------------------------------------------

    def append_from_client(self, records: memoryview | bytes | None, now_ms: int) -> AppendResult:
        """Validate one produce partition's records and append them; Kafka errors as data."""
        if not records:
            return AppendResult(ErrorCode.CORRUPT_MESSAGE, message="no record batch")
        if self.role is not Role.LEADER:
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
        if header.is_control:
            return AppendResult(ErrorCode.INVALID_RECORD, message="clients may not write control batches")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            return AppendResult(ErrorCode.INVALID_RECORD, message="inconsistent record count")
        if header.is_transactional:
            verify = self.txn_verifier
            error = ErrorCode.INVALID_TXN_STATE
            if verify is not None:
                error = verify(self, header.producer_id, header.producer_epoch)
            if error:
                return AppendResult(error, message=f"transactional batch refused: {ErrorCode(error).name}")
        pid = header.producer_id
        first_seq = header.base_sequence
        last_seq = last_sequence(first_seq, header.last_offset_delta)
        with self.lock:
            if self.deleted:
                return AppendResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if pid >= 0:
                check = self.producers.check(pid, header.producer_epoch, first_seq, last_seq)
                if check.error:
                    return AppendResult(check.error, message=check.message)
                if check.duplicate is not None:
                    dup = check.duplicate
                    return AppendResult(
                        0, dup.first_offset, -1, self.log.log_start_offset, last_offset=dup.last_offset
                    )
            leo = self.log.log_end_offset
            try:
                table = decode_at(view, header, leo, self.max_uncompressed_bytes)
            except RecordBatchTooLarge as exc:
                return AppendResult(ErrorCode.MESSAGE_TOO_LARGE, message=str(exc))
            except CorruptRecordBatch as exc:
                return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
            except InvalidRecordStructure as exc:
                return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
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
                return AppendResult(refused.error, message=refused.message, record_errors=refused.records)
            attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
            cacheable = True
            if self.target_codec is not None and self.target_codec != header.compression:
                # compression.type other than "producer": fetches re-encode with the topic's codec
                attributes = (attributes & ~0x07) | self.target_codec
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
            try:
                wire_size = len(view) if cacheable else None  # fetch budgets count the bytes sent
                stored = self.log.append(table, meta, now_ms=now_ms, wire_size=wire_size)
            except InvalidRecord as exc:
                return AppendResult(ErrorCode.INVALID_RECORD, message=str(exc))
            except InvalidAppend as exc:
                return AppendResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
            except StorageError as exc:
                log.error("append to %s-%d failed: %s", self.topic, self.index, exc)
                return AppendResult(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc))
            base = stored.base_offset
            last = stored.last_offset
            append_time = stored.max_timestamp if stored.attributes & TIMESTAMP_TYPE_MASK else -1
            if cacheable:
                self.wire.add(base, last, rewrite_for_wire_cache(view, base, self.leader_epoch, append_time))
            else:
                self.wire.clear()
            if pid >= 0:
                self.producers.record(
                    pid,
                    header.producer_epoch,
                    first_seq,
                    last_seq,
                    base,
                    last,
                    stored.max_timestamp,
                    is_transactional=header.is_transactional,
                )
            log_start = self.log.log_start_offset
            rolled = self.log.segment_count != segments
        if rolled and self.on_roll is not None:
            self.on_roll(self)
        self._wake_log_end_readers()  # followers fetch it; consumers wait for the high watermark
        self.leader_appended()
        return AppendResult(0, base, append_time, log_start, last_offset=last)

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
        for b in self.log.read(offset, max_bytes, max_offset=max_offset, min_one=min_one):
            data = encode_stored(b.meta, b.records)
            total += len(data)
            if total > max_bytes and (out or not min_one):
                break  # stored sizes are estimates when the bytes were re-encoded
            out.append(data)
        return out

    # --- waiting fetches --------------------------------------------------------------------

    def add_waiter(self, callback: Callable[[], None], *, reads_to_log_end: bool = False) -> None:
        """Call ``callback`` once when there may be more to read: for a fetch that reads to the
        log end (a follower's) when the log grows, for one that reads to the high watermark (a
        consumer's) when that moves; for both on truncation, deletion or a role change."""
        (self._log_end_waiters if reads_to_log_end else self._waiters).append(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        for waiters in (self._waiters, self._log_end_waiters):
            try:
                waiters.remove(callback)
            except ValueError:
                pass

    def wake(self) -> None:
        """Something changed (truncation, deletion, a role): let every waiting fetch look again."""
        self._wake_log_end_readers()
        self._wake_watermark_readers()
        self._wake_log_start_waiters()

    def add_log_start_waiter(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when a follower reports another log start offset (the low
        watermark may have moved) or the replica's role changes."""
        self._log_start_waiters.append(callback)

    def remove_log_start_waiter(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._log_start_waiters.remove(callback)

    def log_start_moved(self) -> None:
        """The leader moved its log start offset (on the event loop): followers' waiting fetches
        answer now, so they learn it without waiting for new records."""
        self._wake_log_end_readers()

    def low_watermark(self, live_brokers: Collection[int]) -> int:
        """Kafka's low watermark (see ``LeaderState.low_watermark``); -1 unless leading."""
        state = self.leader_state
        if state is None:
            return -1
        return state.low_watermark(self.log.log_start_offset, live_brokers)

    def _wake_log_start_waiters(self) -> None:
        if self._log_start_waiters:
            waiters, self._log_start_waiters = self._log_start_waiters, []
            for cb in waiters:
                cb()

    def _wake_log_end_readers(self) -> None:
        if self._log_end_waiters:
            waiters, self._log_end_waiters = self._log_end_waiters, []
            for cb in waiters:
                cb()

    def _wake_watermark_readers(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for cb in waiters:
                cb()

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
            self._fail_hw_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
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
            self._wake_log_start_waiters()

    def isr_changed(self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> None:
        """The controller accepted an ISR change (AlterPartition's answer)."""
        state = self.leader_state
        if state is None or leader_epoch != self.leader_epoch:
            return
        state.update_partition(self.replicas, isr, partition_epoch)
        self.isr, self.partition_epoch = state.isr, state.partition_epoch
        self._hw_advanced(state.maybe_advance_high_watermark(self.log.log_end_offset))

    def add_hw_waiter(self, offset: int, callback: HwWaiter) -> None:
        """Call ``callback(0)`` once the high watermark is past ``offset`` (now, if it is), or
        ``callback(error)`` when this replica stops leading."""
        if self.high_watermark > offset:
            callback(0)
        elif self.role is not Role.LEADER:
            callback(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            self._hw_waiters.append((offset, callback))

    def remove_hw_waiter(self, callback: HwWaiter) -> None:
        self._hw_waiters = [(o, cb) for o, cb in self._hw_waiters if cb is not callback]

    def _hw_advanced(self, advanced: bool) -> None:
        if not advanced:
            return
        if self._hw_waiters:
            hw = self.high_watermark
            due = [cb for o, cb in self._hw_waiters if o < hw]
            if due:
                self._hw_waiters = [(o, cb) for o, cb in self._hw_waiters if o >= hw]
                for cb in due:
                    cb(0)
        self._wake_watermark_readers()  # consumers long-polling may see more now

    def _fail_hw_waiters(self, code: int) -> None:
        waiters, self._hw_waiters = self._hw_waiters, []
        for _, cb in waiters:
            cb(code)

    # --- as follower --------------------------------------------------------------------------

    def append_as_follower(self, records: memoryview | bytes, now_ms: int) -> int:
        """Append the leader's batches as they are (offsets, epochs, producer metadata); batches
        already held are skipped. Returns how many batches were appended; raises
        CorruptRecordBatch (nothing after the bad batch is appended)."""
        view = records if type(records) is memoryview else memoryview(records)
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
                    table, meta, now_ms=now_ms, base_offset=header.base_offset, wire_size=header.size_in_bytes
                )
                apply_to_producer_state(self.producers, stored, table)
                rolled = self.log.segment_count != segments
            if rolled and self.on_roll is not None:
                self.on_roll(self)
            appended += 1
        return appended

    def follower_high_watermark(self, leader_high_watermark: int) -> None:
        """The leader reported its high watermark: ours is that, within our log."""
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw != self._hw:
            self._hw = hw
            self._wake_watermark_readers()

    def truncate_to(self, offset: int) -> None:
        """Cut the log at ``offset`` (a follower meeting a new leader); the producer state is
        rebuilt from what is left and cached wire bytes are dropped."""
        with self.lock:
            if offset >= self.log.log_end_offset:
                return
            self.log.truncate_to(offset)
            self.wire.clear()
            self.producers = ProducerStateTable()
            rebuild_producer_state(self)
            self._hw = min(self._hw, offset)
        log.info("truncated %s-%d to offset %d", self.topic, self.index, offset)
        self.wake()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts past ours: start over, empty, at ``offset``."""
        with self.lock:
            self.log.truncate_fully_and_start_at(offset)
            self.wire.clear()
            self.producers = ProducerStateTable()
            self._hw = offset
        log.info("%s-%d starts over at the leader's log start offset %d", self.topic, self.index, offset)
        self.wake()

    # --- log start changes (any thread) -----------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        start = self.log.delete_records_before(offset)
        self.forget_below(start)
        return start

    def forget_below(self, log_start_offset: int) -> None:
        with self.lock:
            self.producers.truncate(log_start_offset)

    def close(self, *, flush: bool = True) -> None:
        self.wire.clear()  # give its share of the broker's wire budget back
        if flush:
            self.log.flush()
        self.log.close()


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


def apply_to_producer_state(producers: ProducerStateTable, meta: Any, records: Any = None) -> None:
    """Replay one stored batch into the idempotence table (a follower append, or a rebuild);
    a marker's type comes from its record (``records``), else is read back from the log."""
    if meta.producer_id < 0:
        return
    last = meta.base_offset + meta.last_offset_delta
    producers.record(
        meta.producer_id,
        meta.producer_epoch,
        meta.base_sequence,
        last_sequence(meta.base_sequence, meta.last_offset_delta),
        meta.base_offset,
        last,
        meta.max_timestamp,
        is_transactional=bool(meta.attributes & 0x10) and not meta.attributes & 0x20,
    )
    if meta.attributes & 0x20 and records is not None:
        key = records.column("key")[0].as_py()
        value = records.column("value")[0].as_py()
        aborted = rec.parse_control_record(key, value).is_abort
        producers.end_transaction(meta.producer_id, meta.producer_epoch, marker_offset=meta.base_offset,
                                  aborted=aborted)


def rebuild_producer_state(part: Partition) -> None:
    """Replay the batch metadata of the log into the idempotence table: open transactions (the last
    stable offset) and the aborted-transactions index come back too; only markers' records are read."""
    entries = part.log.batch_metadata()
    for m in metas_from_entries(entries[entries["producer_id"] >= 0]):
        apply_to_producer_state(part.producers, m)
        if m.attributes & 0x20:
            # A marker: whether it aborts is in its record (read only for open transactions).
            open_txn = m.producer_id in part.producers.open_transactions
            aborted = open_txn and is_abort_marker(part.log, m.base_offset)
            part.producers.end_transaction(
                m.producer_id, m.producer_epoch, marker_offset=m.base_offset, aborted=aborted
            )
