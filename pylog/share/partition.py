"""The share-partition state machine (KIP-932): which records of one partition a share group has
handed out, to whom, until when, and how often.

Theory of operation. A share group reads a partition between two offsets: the *start offset*
(SPSO; everything below is done) and the *end offset* (one past the last record ever acquired).
Records in between are *in flight*, each in one state:

    AVAILABLE ──acquire──► ACQUIRED(member, lock deadline, delivery count + 1)
    ACQUIRED ──ACCEPT──► ACKNOWLEDGED
    ACQUIRED ──REJECT / GAP──► ARCHIVED
    ACQUIRED ──RELEASE, lock expiry, member gone──► AVAILABLE, or ARCHIVED once the delivery
                                                     count reached `delivery_count_limit`

New records are acquired from the end offset, but never more than `max_in_flight` records past
the start offset (`group.share.partition.max.record.locks`), which is what lets several members
share one partition: each fetch takes a slice, the others take the next ones. The start offset
advances over a prefix of ACKNOWLEDGED / ARCHIVED records, and they are forgotten. A record is
only ever ACQUIRED by one member at a time, so no record is delivered to two members at once.

What survives a restart is `snapshot()`: the start offset and the in-flight records with their
states and delivery counts, acquired ones written as AVAILABLE (locks do not survive). It is the
value of Kafka's ShareSnapshot record. The clock is passed in; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from pylog.protocol.errors import ErrorCode


class RecordState(IntEnum):
    """Kafka's delivery states (the persisted ones are 0, 2 and 4)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int | None = None


@dataclass(frozen=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareConfig:
    lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_in_flight: int = 2000  # group.share.partition.max.record.locks


class SharePartition:
    def __init__(self, config: ShareConfig, start_offset: int, batches: Iterable[StateBatch] = ()) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlight] = {}
        for b in batches:
            if b.delivery_state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED, RecordState.AVAILABLE):
                for o in range(max(b.first_offset, start_offset), b.last_offset + 1):
                    self.records[o] = InFlight(RecordState(b.delivery_state), b.delivery_count)
                self.end_offset = max(self.end_offset, b.last_offset + 1)
        self._advance()

    # ------------------------------------------------------------------ queries

    def next_fetch_offset(self) -> int | None:
        """The first offset a fetch should read from, None when the in-flight cap is reached and
        nothing in flight is available."""
        for o in range(self.start_offset, self.end_offset):
            r = self.records.get(o)
            if r is None or r.state is RecordState.AVAILABLE:
                return o
        if self.end_offset - self.start_offset >= self.config.max_in_flight:
            return None
        return self.end_offset

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state is RecordState.ACQUIRED)

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset

    def next_deadline_ms(self) -> int | None:
        return min((r.deadline_ms for r in self.records.values() if r.deadline_ms is not None), default=None)

    # ------------------------------------------------------------------ transitions

    def acquire(
        self, member_id: str, batches: Sequence[tuple[int, int]], max_records: int, now_ms: int
    ) -> list[Acquired]:
        """Acquire for `member_id` up to `max_records` offsets that lie in `batches` (the (first, last)
        offsets of the record batches just read from the log). Returns contiguous ranges."""
        deadline = now_ms + self.config.lock_duration_ms
        got: list[int] = []
        counts: list[int] = []
        limit = self.start_offset + self.config.max_in_flight
        for first, last in batches:
            for o in range(max(first, self.start_offset), last + 1):
                if len(got) >= max_records:
                    break
                r = self.records.get(o)
                if r is None:
                    if o < self.end_offset:
                        continue  # below the end but forgotten: already done
                    if o >= limit:
                        break
                    r = self.records[o] = InFlight(RecordState.AVAILABLE)
                    self.end_offset = max(self.end_offset, o + 1)
                if r.state is not RecordState.AVAILABLE:
                    continue
                r.state, r.member_id, r.deadline_ms = RecordState.ACQUIRED, member_id, deadline
                r.delivery_count += 1
                got.append(o)
                counts.append(r.delivery_count)
        return _ranges(got, counts)

    def acknowledge(self, member_id: str, first: int, last: int, types: Sequence[int]) -> ErrorCode:
        """Apply one AcknowledgementBatch: one type for the whole range, or one per offset."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in (0, 1, 2, 3) for t in types):
            return ErrorCode.INVALID_REQUEST
        for o in range(first, last + 1):
            t = types[0] if len(types) == 1 else types[o - first]
            r = self.records.get(o)
            if r is None or r.state is not RecordState.ACQUIRED or r.member_id != member_id:
                if t == AckType.GAP and (r is None or r.state is not RecordState.ACQUIRED):
                    continue
                return ErrorCode.INVALID_RECORD_STATE
        for o in range(first, last + 1):
            r = self.records.get(o)
            if r is None or r.state is not RecordState.ACQUIRED:
                continue
            t = types[0] if len(types) == 1 else types[o - first]
            if t == AckType.ACCEPT:
                self._set(r, RecordState.ACKNOWLEDGED)
            elif t == AckType.RELEASE:
                self._release(r)
            else:
                self._set(r, RecordState.ARCHIVED)
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> bool:
        """The member left or closed its session: its acquired records become available."""
        changed = False
        for r in self.records.values():
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                self._release(r)
                changed = True
        self._advance()
        return changed

    def expire(self, now_ms: int) -> tuple[bool, bool]:
        """Release records whose lock expired. Returns (any released, any archived)."""
        released = archived = False
        for r in self.records.values():
            if r.deadline_ms is not None and r.deadline_ms <= now_ms:
                self._release(r)
                released = True
                archived |= r.state is RecordState.ARCHIVED
        if released:
            self._advance()
        return released, archived

    def move_start(self, log_start_offset: int) -> None:
        """Retention removed records below `log_start_offset`: they can no longer be delivered."""
        if log_start_offset > self.start_offset:
            for o in range(self.start_offset, min(log_start_offset, self.end_offset)):
                self.records.pop(o, None)
            self.start_offset = log_start_offset
            self.end_offset = max(self.end_offset, log_start_offset)
            self._advance()

    def _release(self, r: InFlight) -> None:
        if r.delivery_count >= self.config.delivery_count_limit:
            self._set(r, RecordState.ARCHIVED)
        else:
            self._set(r, RecordState.AVAILABLE)

    @staticmethod
    def _set(r: InFlight, state: RecordState) -> None:
        r.state, r.member_id, r.deadline_ms = state, None, None

    def _advance(self) -> None:
        o = self.start_offset
        while o < self.end_offset:
            r = self.records.get(o)
            if r is not None and r.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            self.records.pop(o, None)
            o += 1
        self.start_offset = o

    # ------------------------------------------------------------------ durability

    def snapshot(self) -> tuple[int, list[StateBatch]]:
        """Start offset and runs of in-flight records (acquired ones as AVAILABLE)."""
        batches: list[StateBatch] = []
        for o in range(self.start_offset, self.end_offset):
            r = self.records.get(o)
            if r is None:
                continue
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset == o - 1
                and last.delivery_state == state
                and (last.delivery_count == r.delivery_count)
            ):
                batches[-1] = StateBatch(last.first_offset, o, state, r.delivery_count)
            else:
                batches.append(StateBatch(o, o, int(state), r.delivery_count))
        return self.start_offset, batches


def _ranges(offsets: list[int], counts: list[int]) -> list[Acquired]:
    out: list[Acquired] = []
    for o, c in zip(offsets, counts):
        if out and out[-1].last_offset == o - 1 and out[-1].delivery_count == c:
            out[-1] = Acquired(out[-1].first_offset, o, c)
        else:
            out.append(Acquired(o, o, c))
    return out
