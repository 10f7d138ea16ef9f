"""Plain and transactional offset commits of one partition: whichever record was appended to
`__consumer_offsets` later wins, live, on replay, and on replay of the compacted log (Kafka's
OffsetMetadataManager: offsets carry their record's log offset)."""

from __future__ import annotations

from dataclasses import dataclass, field

import hypothesis.strategies as st
from group_support import GROUP, coordinator
from hypothesis import given, settings
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import (
    CoordinatorRecord,
    GroupCoordinator,
    OffsetCommitPartition,
    Output,
    TxnMarkerRecord,
    TxnOffsetRecord,
)
from pylog.groups.coordinator import LogEntry

TPS = (("t", 0), ("t", 1))
EPOCH = 0


@dataclass
class OffsetsLog:
    """One `__consumer_offsets` partition and a coordinator appending to it like the broker shell:
    each batch's base offset is reported back with `records_appended`."""

    c: GroupCoordinator = field(default_factory=coordinator)
    log: list[LogEntry] = field(default_factory=list)
    now: int = 0

    @property
    def partition(self) -> int:
        return self.c.partition_for(GROUP)

    def _append(self, out: Output) -> None:
        records: list[CoordinatorRecord] = out.records
        run: list[CoordinatorRecord] = []
        for r in [*records, None]:  # one batch per run of one producer, as the shell does
            if run and (r is None or r.producer_id != run[0].producer_id):
                base = len(self.log)
                for rec in run:
                    if rec.producer_id >= 0:
                        self.log.append(TxnOffsetRecord(rec.producer_id, rec.key, rec.value, len(self.log)))
                    else:
                        self.log.append((rec.key, rec.value, len(self.log)))
                self.c.records_appended(run, base)
                run = []
            if r is not None:
                assert r.partition == self.partition
                run.append(r)

    def commit(self, tp: tuple[str, int], offset: int) -> None:
        out = self.c.commit_offsets(GROUP, -1, "", None, [OffsetCommitPartition(*tp, offset)], api_version=8,
                                    now_ms=self.now)
        assert [p.error for p in out.response] == [E.NONE]
        self._append(out)

    def txn_commit(self, pid: int, tp: tuple[str, int], offset: int) -> None:
        out = self.c.txn_commit_offsets(GROUP, pid, EPOCH, -1, "", None, [OffsetCommitPartition(*tp, offset)],
                                        now_ms=self.now)
        assert [p.error for p in out.response] == [E.NONE]
        self._append(out)

    def end_txn(self, pid: int, commit: bool) -> None:
        self.log.append(TxnMarkerRecord(pid, commit))
        self.c.complete_txn(pid, self.partition, commit, now_ms=self.now)

    def delete(self, tp: tuple[str, int]) -> None:
        out = self.c.delete_offsets(GROUP, [tp], now_ms=self.now)
        assert out.response.error in (E.NONE, E.GROUP_ID_NOT_FOUND)
        self._append(out)


def view(c: GroupCoordinator) -> dict[tuple[str, int], int]:
    """Committed offsets, UNSTABLE_OFFSET_COMMIT where a transaction holds one pending."""
    res = c.fetch_offsets(GROUP, list(TPS), require_stable=True)
    return {(p.topic, p.partition): p.offset if p.error == E.NONE else p.error for p in res.partitions}


def replayed(log: list[LogEntry]) -> dict[tuple[str, int], int]:
    c = coordinator()
    c.load_partition(c.partition_for(GROUP), log, now_ms=0)
    return view(c)


def compacted(log: list[LogEntry]) -> list[LogEntry]:
    """The log after Kafka's cleaner, below the last stable offset: aborted transactional records
    removed, then the latest record per key among plain and committed ones (markers kept)."""
    outcome: dict[int, bool | None] = {}  # transactional entry -> committed? (None: still open)
    open_txn: dict[int, list[int]] = {}
    for i, e in enumerate(log):
        if isinstance(e, TxnOffsetRecord):
            open_txn.setdefault(e.producer_id, []).append(i)
        elif isinstance(e, TxnMarkerRecord):
            outcome.update(dict.fromkeys(open_txn.pop(e.producer_id, []), e.commit))
    for js in open_txn.values():
        outcome.update(dict.fromkeys(js))
    lso = min((js[0] for js in open_txn.values()), default=len(log))

    def key(e: LogEntry) -> bytes:
        return e[0] if isinstance(e, tuple) else e.key  # type: ignore[union-attr]

    competing = [i for i, e in enumerate(log[:lso])
                 if isinstance(e, tuple) or (isinstance(e, TxnOffsetRecord) and outcome[i])]
    survivors = set({key(log[i]): i for i in competing}.values())
    return [e for i, e in enumerate(log) if i >= lso or isinstance(e, TxnMarkerRecord) or i in survivors]


def check(s: OffsetsLog) -> dict[tuple[str, int], int]:
    live = view(s.c)
    assert replayed(s.log) == live
    assert replayed(compacted(s.log)) == live
    return live


def test_plain_commit_between_txn_offset_and_marker_wins() -> None:
    s = OffsetsLog()
    s.txn_commit(7, TPS[0], 10)
    s.commit(TPS[0], 5)  # appended after the transactional record
    s.end_txn(7, True)
    assert check(s) == {TPS[0]: 5, TPS[1]: -1}


def test_txn_offset_after_a_plain_commit_wins() -> None:
    s = OffsetsLog()
    s.commit(TPS[0], 5)
    s.txn_commit(7, TPS[0], 10)
    assert check(s) == {TPS[0]: E.UNSTABLE_OFFSET_COMMIT, TPS[1]: -1}
    s.end_txn(7, True)
    assert check(s) == {TPS[0]: 10, TPS[1]: -1}


def test_aborted_txn_offset_leaves_the_plain_commit() -> None:
    s = OffsetsLog()
    s.commit(TPS[0], 5)
    s.txn_commit(7, TPS[0], 10)
    s.end_txn(7, False)
    assert check(s) == {TPS[0]: 5, TPS[1]: -1}


def test_offset_delete_drops_pending_offsets_of_that_partition() -> None:
    s = OffsetsLog()
    s.commit(TPS[0], 5)
    s.txn_commit(7, TPS[0], 10)
    s.txn_commit(7, TPS[1], 20)
    s.delete(TPS[0])
    assert check(s) == {TPS[0]: -1, TPS[1]: E.UNSTABLE_OFFSET_COMMIT}
    s.end_txn(7, True)
    assert check(s) == {TPS[0]: -1, TPS[1]: 20}


def test_expiry_spares_offsets_with_pending_transactional_ones() -> None:
    s = OffsetsLog(coordinator(offsets_retention_minutes=1))
    s.commit(TPS[0], 5)
    s.commit(TPS[1], 6)
    s.txn_commit(7, TPS[0], 10)
    s.now = 120_000
    s._append(s.c.expire_offsets(s.now))
    assert check(s) == {TPS[0]: E.UNSTABLE_OFFSET_COMMIT, TPS[1]: -1}
    s.end_txn(7, True)
    assert check(s) == {TPS[0]: 10, TPS[1]: -1}


def test_unacknowledged_appends_keep_the_call_order_answer() -> None:
    """A shell that reports no log offsets: the transactional offset wins at its marker."""
    c = coordinator()
    c.commit_offsets(GROUP, -1, "", None, [OffsetCommitPartition("t", 0, 5)], api_version=8, now_ms=0)
    c.txn_commit_offsets(GROUP, 7, EPOCH, -1, "", None, [OffsetCommitPartition("t", 0, 10)], now_ms=0)
    c.complete_txn(7, c.partition_for(GROUP), True, now_ms=0)
    assert view(c)[("t", 0)] == 10


ops = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(TPS), st.integers(0, 99)),
    st.tuples(st.just("txn"), st.sampled_from((7, 8)), st.sampled_from(TPS), st.integers(0, 99)),
    st.tuples(st.just("end"), st.sampled_from((7, 8)), st.booleans()),
    st.tuples(st.just("delete"), st.sampled_from(TPS)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(ops, max_size=14))
def test_later_append_wins_live_on_replay_and_after_compaction(steps: list[tuple]) -> None:
    s = OffsetsLog()
    committed: dict[tuple[str, int], tuple[int, int]] = {}  # tp -> (offset, position in the log)
    pending: dict[int, dict[tuple[str, int], tuple[int, int]]] = {}
    for step in steps:
        if step[0] == "commit":
            _, tp, off = step
            committed[tp] = (off, len(s.log))
            s.commit(tp, off)
        elif step[0] == "txn":
            _, pid, tp, off = step
            pending.setdefault(pid, {})[tp] = (off, len(s.log))
            s.txn_commit(pid, tp, off)
        elif step[0] == "end":
            _, pid, commit = step
            for tp, (off, pos) in pending.pop(pid, {}).items():
                if commit and (tp not in committed or committed[tp][1] < pos):
                    committed[tp] = (off, pos)
            s.end_txn(pid, commit)
        else:  # OffsetDelete writes a tombstone where an offset is committed
            _, tp = step
            if committed.pop(tp, None) is not None:
                for by_tp in pending.values():
                    by_tp.pop(tp, None)
            s.delete(tp)
        want = {tp: committed[tp][0] if tp in committed else -1 for tp in TPS}
        for by_tp in pending.values():
            for tp in by_tp:
                want[tp] = E.UNSTABLE_OFFSET_COMMIT
        assert check(s) == want
