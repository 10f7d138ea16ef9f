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
    ACQUIRED ──RENEW──► ACQUIRED with a fresh lock deadline
    control batches, aborted transactions (read_committed) ──► ARCHIVED, never acquired

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
    RENEW = 4  # KIP-1222: extends the acquisition lock (ShareFetch / ShareAcknowledge v2)


@dataclass
class Run:
    """Consecutive in-flight offsets in the same state (the unit of every transition)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    deadline_ms: int | None = None

    def same(self, other: Run) -> bool:
        return (self.state, self.delivery_count, self.member_id, self.deadline_ms) == (
            other.state, other.delivery_count, other.member_id, other.deadline_ms)


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
    """In-flight records are kept as runs of offsets, so every transition costs per run (an
    acquired batch, an acknowledged range), never per record."""

    def __init__(self, config: ShareConfig, start_offset: int, batches: Iterable[StateBatch] = ()) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.runs: list[Run] = []
        for b in sorted(batches, key=lambda b: b.first_offset):
            first = max(b.first_offset, self.end_offset)
            if b.last_offset < first or b.delivery_state not in (0, 2, 4):
                continue
            if first > self.end_offset:
                self.runs.append(Run(self.end_offset, first - 1, RecordState.AVAILABLE))
            self.runs.append(Run(first, b.last_offset, RecordState(b.delivery_state), b.delivery_count))
            self.end_offset = b.last_offset + 1
        self._tidy()

    # ------------------------------------------------------------------ queries

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset; None outside [start, end)."""
        for r in self.runs:
            if r.first <= offset <= r.last:
                return r.state, r.delivery_count
        return None

    def next_fetch_offset(self) -> int | None:
        """The first offset a fetch should read from, None when the in-flight cap is reached and
        nothing in flight is available."""
        for r in self.runs:
            if r.state is RecordState.AVAILABLE:
                return r.first
        if self.end_offset - self.start_offset >= self.config.max_in_flight:
            return None
        return self.end_offset

    def acquired_count(self) -> int:
        return sum(r.last - r.first + 1 for r in self.runs if r.state is RecordState.ACQUIRED)

    def finished_count(self) -> int:
        """In-flight records already acknowledged or archived (they no longer count as lag)."""
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        return sum(r.last - r.first + 1 for r in self.runs if r.state in done)

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset

    def next_deadline_ms(self) -> int | None:
        return min((r.deadline_ms for r in self.runs if r.deadline_ms is not None), default=None)

    # ------------------------------------------------------------------ transitions

    def acquire(
        self,
        member_id: str,
        batches: Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
        skipped: Sequence[tuple[int, int]] = (),
        *,
        whole_batches: bool = False,
        batch_size: int = 0,
    ) -> list[Acquired]:
        """Acquire for `member_id` up to `max_records` offsets that lie in `batches` (the (first, last)
        offsets of the record batches just read from the log, in order). `skipped` ranges (control
        batches, a read_committed group's aborted transactions) are archived, since no consumer
        may receive or acknowledge them.

        `whole_batches` is Kafka's batch-optimized acquire mode: new records are taken by whole log
        batches, so the last one may carry the count past `max_records`; otherwise (record-limit
        mode) the count stops exactly at `max_records`. With `batch_size` the acquired ranges are
        cut at log-batch boundaries into pieces of about that many records."""
        deadline = now_ms + self.config.lock_duration_ms
        left = max_records
        got: list[Acquired] = []
        spans = sorted([(f, l_, True) for f, l_ in batches] + [(f, l_, False) for f, l_ in skipped])
        for first, last, data in spans:
            first = max(first, self.start_offset)
            if last < first:
                continue
            if not data and first < self.end_offset:  # in flight (delivered before): never again
                for r in self._slice(first, min(last, self.end_offset - 1)):
                    if r.state is RecordState.AVAILABLE:
                        _set(r, RecordState.ARCHIVED)
            elif first < self.end_offset and left > 0:  # in flight: re-acquire available runs
                stop = min(last, self.end_offset - 1)
                for r in self._slice(first, stop):
                    if left <= 0:
                        break
                    if r.state is not RecordState.AVAILABLE:
                        continue
                    if r.last - r.first + 1 > left:
                        self._split(r.first + left)
                    r.state, r.member_id, r.deadline_ms = RecordState.ACQUIRED, member_id, deadline
                    r.delivery_count += 1
                    left -= r.last - r.first + 1
                    got.append(Acquired(r.first, r.last, r.delivery_count))
            if last < self.end_offset:
                continue
            first = max(first, self.end_offset)
            if first > self.end_offset:  # offsets missing from the log: nothing to deliver
                self.runs.append(Run(self.end_offset, first - 1, RecordState.ARCHIVED))
                self.end_offset = first
            if not data:
                self.runs.append(Run(first, last, RecordState.ARCHIVED))
                self.end_offset = last + 1
                continue
            if left <= 0:
                break
            cap = self.start_offset + self.config.max_in_flight - 1
            stop = min(last, cap) if whole_batches else min(last, cap, first + left - 1)
            if stop < first:
                break
            self.runs.append(Run(first, stop, RecordState.ACQUIRED, 1, member_id, deadline))
            self.end_offset = stop + 1
            left -= stop - first + 1
            got.append(Acquired(first, stop, 1))
            if stop < last:
                break
        self._tidy()
        merged = _merge(got)
        if batch_size > 0 and whole_batches:
            merged = _cut(merged, sorted(f for f, _l in batches), batch_size)
        return merged

    def acknowledge(
        self, member_id: str, first: int, last: int, types: Sequence[int], now_ms: int | None = None
    ) -> ErrorCode:
        """Apply one AcknowledgementBatch: one type for the whole range, or one per offset. RENEW
        (4) needs `now_ms`, the moment its lock starts again."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        allowed = (0, 1, 2, 3) if now_ms is None else (0, 1, 2, 3, 4)
        if any(t not in allowed for t in types):
            return ErrorCode.INVALID_REQUEST
        pieces = [(first, last, types[0])] if len(types) == 1 else _type_runs(first, types)
        for f, l_, t in pieces:
            covered = f
            for r in self._overlapping(f, l_):
                mine = r.state is RecordState.ACQUIRED and r.member_id == member_id
                if not mine and not (t == AckType.GAP and r.state is not RecordState.ACQUIRED):
                    return ErrorCode.INVALID_RECORD_STATE
                if r.first > covered and t != AckType.GAP:
                    return ErrorCode.INVALID_RECORD_STATE
                covered = r.last + 1
            if covered <= l_ and t != AckType.GAP:
                return ErrorCode.INVALID_RECORD_STATE
        for f, l_, t in pieces:
            for r in self._slice(f, l_):
                if r.state is not RecordState.ACQUIRED:
                    continue
                if t == AckType.RENEW and now_ms is not None:
                    r.deadline_ms = now_ms + self.config.lock_duration_ms
                elif t == AckType.ACCEPT:
                    _set(r, RecordState.ACKNOWLEDGED)
                elif t == AckType.RELEASE:
                    self._release(r)
                else:
                    _set(r, RecordState.ARCHIVED)
        self._tidy()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> bool:
        """The member left or closed its session: its acquired records become available."""
        changed = False
        for r in self.runs:
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                self._release(r)
                changed = True
        self._tidy()
        return changed

    def expire(self, now_ms: int) -> tuple[bool, bool]:
        """Release records whose lock expired. Returns (any released, any archived)."""
        released = archived = False
        for r in self.runs:
            if r.deadline_ms is not None and r.deadline_ms <= now_ms:
                self._release(r)
                released = True
                archived |= r.state is RecordState.ARCHIVED
        if released:
            self._tidy()
        return released, archived

    def move_start(self, log_start_offset: int) -> None:
        """Retention removed records below `log_start_offset`: they can no longer be delivered."""
        if log_start_offset > self.start_offset:
            if log_start_offset < self.end_offset:
                self._split(log_start_offset)
            self.runs = [r for r in self.runs if r.first >= log_start_offset]
            self.start_offset = log_start_offset
            self.end_offset = max(self.end_offset, log_start_offset)
            self._tidy()

    def _release(self, r: Run) -> None:
        spent = r.delivery_count >= self.config.delivery_count_limit
        _set(r, RecordState.ARCHIVED if spent else RecordState.AVAILABLE)

    # ------------------------------------------------------------------ runs

    def _overlapping(self, first: int, last: int) -> list[Run]:
        return [r for r in self.runs if r.last >= first and r.first <= last]

    def _slice(self, first: int, last: int) -> list[Run]:
        """The runs covering [first, last], split so that none sticks out."""
        self._split(first)
        self._split(last + 1)
        return self._overlapping(first, last)

    def _split(self, at: int) -> None:
        for i, r in enumerate(self.runs):
            if r.first < at <= r.last:
                tail = Run(at, r.last, r.state, r.delivery_count, r.member_id, r.deadline_ms)
                r.last = at - 1
                self.runs.insert(i + 1, tail)
                return

    def _tidy(self) -> None:
        """Drop the finished prefix (the start offset moves) and merge equal neighbours."""
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        i = 0
        while i < len(self.runs) and self.runs[i].state in done:
            i += 1
        if i:
            self.start_offset = self.runs[i - 1].last + 1
            del self.runs[:i]
        if not self.runs:
            self.start_offset = max(self.start_offset, self.end_offset)
        merged: list[Run] = []
        for r in self.runs:
            if merged and merged[-1].last + 1 == r.first and merged[-1].same(r):
                merged[-1].last = r.last
            else:
                merged.append(r)
        self.runs = merged

    # ------------------------------------------------------------------ durability

    def snapshot(self) -> tuple[int, list[StateBatch]]:
        """Start offset and runs of in-flight records (acquired ones as AVAILABLE)."""
        batches: list[StateBatch] = []
        for r in self.runs:
            state = int(RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state)
            last = batches[-1] if batches else None
            if last is not None and last.last_offset + 1 == r.first and (
                (last.delivery_state, last.delivery_count) == (state, r.delivery_count)
            ):
                batches[-1] = StateBatch(last.first_offset, r.last, state, r.delivery_count)
            else:
                batches.append(StateBatch(r.first, r.last, state, r.delivery_count))
        return self.start_offset, batches


def _set(r: Run, state: RecordState) -> None:
    r.state, r.member_id, r.deadline_ms = state, None, None


def _type_runs(first: int, types: Sequence[int]) -> list[tuple[int, int, int]]:
    """Per-offset acknowledge types as (first, last, type) runs."""
    out: list[tuple[int, int, int]] = []
    for i, t in enumerate(types):
        o = first + i
        if out and out[-1][2] == t and out[-1][1] == o - 1:
            out[-1] = (out[-1][0], o, t)
        else:
            out.append((o, o, t))
    return out


def _cut(got: list[Acquired], bases: Sequence[int], batch_size: int) -> list[Acquired]:
    """Cut acquired ranges at the first log batch that starts `batch_size` or more records after
    the piece's first offset (Kafka's createBatches), so a client acknowledges in such pieces."""
    out: list[Acquired] = []
    for a in got:
        start = a.first_offset
        for base in bases:
            if base > a.last_offset:
                break
            if base > start and base - start >= batch_size:
                out.append(Acquired(start, base - 1, a.delivery_count))
                start = base
        out.append(Acquired(start, a.last_offset, a.delivery_count))
    return out


def _merge(got: list[Acquired]) -> list[Acquired]:
    out: list[Acquired] = []
    for a in got:
        if out and out[-1].last_offset + 1 == a.first_offset and out[-1].delivery_count == a.delivery_count:
            out[-1] = Acquired(out[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            out.append(a)
    return out
