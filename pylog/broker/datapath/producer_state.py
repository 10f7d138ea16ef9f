"""Idempotent producer state of one partition.

Theory of operation: for every producer id the partition remembers the current
producer epoch and the metadata of the last five batches it appended (first and
last sequence, first and last offset). A new batch from a client is checked
against that entry before it is written:

* epoch lower than the current one -> INVALID_PRODUCER_EPOCH (the producer was fenced);
* same first/last sequence as a remembered batch -> duplicate, answered with the
  original offsets and not written again;
* new epoch -> its first sequence must be 0 (unless the producer had no state);
* same epoch -> first sequence must follow the last one (wrapping at 2^31-1),
  unless the producer had no state (retention removed it) -> otherwise
  OUT_OF_ORDER_SEQUENCE_NUMBER.

Transactions: a producer's first transactional batch opens its transaction in
this partition (its first offset bounds the last stable offset); the COMMIT or
ABORT marker ends it (``end_transaction``). An aborted transaction is kept in
``aborted`` as (producer id, first offset, marker offset), Kafka's aborted
transaction index, which read_committed fetches report so consumers skip its
batches. Log compaction removes an aborted transaction's records and later its
marker; the entry is dropped (``forget_aborted``) once the records are gone,
before the marker can go, as Kafka's cleaner drops it from the index.

State is rebuilt after a restart from the batch metadata kept in the log, by
replaying ``record`` (and ``end_transaction`` for markers) over the stored
batches in offset order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pylog.model import CONTROL_MASK, INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, TRANSACTIONAL_MASK

BATCHES_KEPT = 5

NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


@dataclass(frozen=True, slots=True)
class BatchEntry:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchEntry] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1
    # first offset of the open transaction, or -1
    txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@dataclass(frozen=True, slots=True)
class Check:
    """Outcome of validating a batch: an error, a duplicate (with its offsets), or go ahead."""

    error: int = NONE
    duplicate: BatchEntry | None = None
    message: str | None = None


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    if base_sequence < 0:
        return NO_SEQUENCE
    return (base_sequence + last_offset_delta) % (INT32_MAX + 1)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateTable:
    """Producer id -> entry for one partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.open_transactions: dict[int, int] = {}  # producer id -> first offset
        # ordered by marker offset; replaced, never mutated, when truncated (readers on other threads)
        self.aborted: list[AbortedTxn] = []

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Check:
        if producer_id < 0:
            return Check()
        entry = self.producers.get(producer_id)
        if entry is None:
            return Check()
        if epoch < entry.epoch:
            return Check(
                INVALID_PRODUCER_EPOCH,
                message=f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}",
            )
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return Check(duplicate=b)
        if first_seq < 0:
            return Check()
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                return Check(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    message=f"new epoch {epoch} of producer {producer_id} must start at sequence 0, "
                    f"got {first_seq}",
                )
            return Check()
        current = entry.last_seq
        if current != NO_SEQUENCE and not _in_sequence(current, first_seq):
            return Check(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                message=f"out of order sequence for producer {producer_id}: {first_seq} "
                f"(incoming), {current} (last appended)",
            )
        return Check()

    def record(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        *,
        is_transactional: bool = False,
    ) -> None:
        """Remember an appended batch (also used to replay the log on start)."""
        if producer_id < 0:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry()
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        if first_seq >= 0:
            entry.batches.append(BatchEntry(first_seq, last_seq, first_offset, last_offset, max_timestamp))
        entry.last_timestamp = max(entry.last_timestamp, max_timestamp)
        if is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = first_offset
            self.open_transactions[producer_id] = first_offset

    def replay(self, meta: Any, *, marker_aborted: bool | None = None) -> None:
        """Replay one stored batch (its ``BatchMeta``): an append, a follower's append or a
        rebuild from the log. A marker ends its producer's transaction when its type is known
        (``marker_aborted``)."""
        if meta.producer_id < 0:
            return
        control = bool(meta.attributes & CONTROL_MASK)
        self.record(
            meta.producer_id,
            meta.producer_epoch,
            meta.base_sequence,
            last_sequence(meta.base_sequence, meta.last_offset_delta),
            meta.base_offset,
            meta.base_offset + meta.last_offset_delta,
            meta.max_timestamp,
            is_transactional=bool(meta.attributes & TRANSACTIONAL_MASK) and not control,
        )
        if control and marker_aborted is not None:
            self.end_transaction(
                meta.producer_id, meta.producer_epoch, marker_offset=meta.base_offset, aborted=marker_aborted
            )

    def end_transaction(
        self, producer_id: int, epoch: int, *, marker_offset: int = -1, aborted: bool = False
    ) -> int | None:
        """A COMMIT / ABORT marker at ``marker_offset``: close the producer's open transaction
        (returning its first offset, None if none was open) and index it if aborted."""
        entry = self.producers.get(producer_id)
        if entry is not None:
            entry.txn_first_offset = -1
            entry.epoch = max(entry.epoch, epoch)
        first = self.open_transactions.pop(producer_id, None)
        if aborted and first is not None and marker_offset >= 0:
            self.aborted.append(AbortedTxn(producer_id, first, marker_offset))
        return first

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_offset): ending at or after the
        fetch offset and starting before the upper bound."""
        aborted = self.aborted
        if not aborted:
            return []
        i = bisect_left(aborted, fetch_offset, key=lambda a: a.last_offset)
        return [a for a in aborted[i:] if a.first_offset < upper_offset]

    def forget_aborted(self, marker_offsets: Iterable[int]) -> None:
        """Drop the aborted transactions ended by these markers: compaction removed their records,
        and the markers themselves may go next (a reader must never be told of an aborted
        transaction whose marker it cannot reach)."""
        gone = set(marker_offsets)
        if gone and self.aborted:
            self.aborted = [a for a in self.aborted if a.last_offset not in gone]

    def first_open_transaction_offset(self) -> int | None:
        """First offset of the oldest open transaction (the last stable offset), if any."""
        return min(self.open_transactions.values()) if self.open_transactions else None

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producers idle longer than producer.id.expiration.ms (no open transaction)."""
        dead = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and e.last_timestamp >= 0 and now_ms - e.last_timestamp > expiration_ms
        ]
        for pid in dead:
            del self.producers[pid]
        return len(dead)

    def truncate(self, log_start_offset: int) -> None:
        """Forget batches and aborted transactions no longer in the log (DeleteRecords / retention)."""
        if self.aborted and self.aborted[0].last_offset < log_start_offset:
            i = bisect_left(self.aborted, log_start_offset, key=lambda a: a.last_offset)
            self.aborted = self.aborted[i:]
        for pid in list(self.producers):
            e = self.producers[pid]
            while e.batches and e.batches[0].last_offset < log_start_offset:
                e.batches.popleft()
            if not e.batches and e.txn_first_offset < 0:
                del self.producers[pid]
