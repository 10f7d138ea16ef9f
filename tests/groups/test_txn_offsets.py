"""TxnOffsetCommit in the group coordinator: pending per producer, materialised by the COMMIT
marker, dropped by ABORT, and the same outcome when the log is replayed."""

from __future__ import annotations

from group_support import GROUP, Shell, coordinator, subscription
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import OffsetCommitPartition, TxnMarkerRecord, TxnOffsetRecord
from pylog.groups.coordinator import LogEntry

PID, EPOCH = 7, 2


def txn_commit(s: Shell, *parts, pid=PID, gen=-1, member="", instance=None, group=GROUP, log=None):
    out = s.c.txn_commit_offsets(
        group, pid, EPOCH, gen, member, instance, [OffsetCommitPartition(*p) for p in parts], now_ms=s.now
    )
    for r in out.records:
        assert (r.producer_id, r.producer_epoch) == (pid, EPOCH)
        assert r.partition == s.c.partition_for(group)
        if log is not None:
            log.append(TxnOffsetRecord(pid, r.key, r.value))
    return [e.error for e in out.response]


def committed(s: Shell, group=GROUP, stable=False):
    res = s.c.fetch_offsets(group, [("t", 0), ("t", 1)], require_stable=stable)
    return {(p.topic, p.partition): (p.offset if p.error == E.NONE else p.error) for p in res.partitions}


def test_pending_until_commit_marker():
    s = Shell(coordinator())
    assert txn_commit(s, ("t", 0, 10), ("t", 1, 20)) == [E.NONE, E.NONE]
    assert committed(s) == {("t", 0): -1, ("t", 1): -1}
    unstable = E.UNSTABLE_OFFSET_COMMIT
    assert committed(s, stable=True) == {("t", 0): unstable, ("t", 1): unstable}
    s.c.complete_txn(PID, s.c.partition_for(GROUP) + 1, True, now_ms=s.now)  # another partition
    assert committed(s) == {("t", 0): -1, ("t", 1): -1}
    s.c.complete_txn(PID, s.c.partition_for(GROUP), True, now_ms=s.now)
    assert committed(s, stable=True) == {("t", 0): 10, ("t", 1): 20}


def test_abort_marker_drops_pending_offsets():
    s = Shell(coordinator())
    txn_commit(s, ("t", 0, 10))
    txn_commit(s, ("t", 1, 5), pid=PID + 1)
    s.c.complete_txn(PID, s.c.partition_for(GROUP), False, now_ms=s.now)
    assert committed(s, stable=True) == {("t", 0): -1, ("t", 1): E.UNSTABLE_OFFSET_COMMIT}
    s.c.complete_txn(PID + 1, s.c.partition_for(GROUP), True, now_ms=s.now)
    assert committed(s, stable=True) == {("t", 0): -1, ("t", 1): 5}


def test_member_checks_of_v3_commits():
    s = Shell(coordinator())
    a, ha = s.join_new(protocols=(("range", subscription("t")),))
    gen, _, _ = s.stabilize([ha])
    assert txn_commit(s, ("t", 0, 1), gen=gen, member=a) == [E.NONE]
    assert txn_commit(s, ("t", 0, 1), gen=gen + 1, member=a) == [E.ILLEGAL_GENERATION]
    assert txn_commit(s, ("t", 0, 1), gen=gen, member="stranger") == [E.UNKNOWN_MEMBER_ID]
    assert txn_commit(s, ("t", 0, 1), gen=gen, member=a, instance="i") == [E.FENCED_INSTANCE_ID]
    assert txn_commit(s, ("t", 0, 1)) == [E.NONE]  # v0-2: no member information
    assert txn_commit(s, ("t", 0, 1), group="") == [E.INVALID_GROUP_ID]


def test_replay_follows_the_markers():
    s = Shell(coordinator())
    log: list[LogEntry] = []
    txn_commit(s, ("t", 0, 10), log=log)
    log.append(TxnMarkerRecord(PID, True))
    txn_commit(s, ("t", 1, 99), log=log)
    log.append(TxnMarkerRecord(PID, False))
    txn_commit(s, ("t", 1, 30), pid=PID + 1, log=log)  # still open when the log ends
    c2 = coordinator()
    c2.load_partition(c2.partition_for(GROUP), log, now_ms=s.now)
    s.c = c2
    assert committed(s) == {("t", 0): 10, ("t", 1): -1}
    assert committed(s, stable=True)[("t", 1)] == E.UNSTABLE_OFFSET_COMMIT
    c2.complete_txn(PID + 1, c2.partition_for(GROUP), True, now_ms=s.now)
    assert committed(s) == {("t", 0): 10, ("t", 1): 30}


def test_group_with_only_pending_offsets_survives_the_retention_check():
    s = Shell(coordinator(offsets_retention_check_interval_ms=1000))
    txn_commit(s, ("t", 0, 10))
    s.absorb(s.c.expire_offsets(s.now + 1))
    assert s.c.group(GROUP) is not None
    s.c.unload_partition(s.c.partition_for(GROUP))
    assert committed(s) == {}
