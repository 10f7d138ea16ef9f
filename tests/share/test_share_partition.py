"""Deterministic tests of the share-partition state machine with a fake clock: acquisition, the
in-flight cap, ACCEPT / RELEASE / REJECT, lock expiry, the delivery-count limit, snapshots."""

from __future__ import annotations

import uuid

from pylog.protocol.errors import ErrorCode

from pylog.share.manager import ShareManager
from pylog.share.partition import AckType, RecordState, ShareConfig, SharePartition
from pylog.share.state import ShareStateStore, decode_snapshot_key, decode_snapshot_value

CFG = ShareConfig(lock_duration_ms=1000, delivery_count_limit=2, max_in_flight=10)
BATCHES = [(0, 4), (5, 9), (10, 19)]


def ranges(acquired):
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in acquired]


def test_no_record_is_acquired_by_two_members() -> None:
    sp = SharePartition(CFG, 0)
    a = ranges(sp.acquire("a", BATCHES, 3, now_ms=0))
    b = ranges(sp.acquire("b", BATCHES, 100, now_ms=0))
    assert a == [(0, 2, 1)]
    assert b == [(3, 9, 1)]  # the in-flight cap (10) stops at offset 9
    assert sp.acquire("c", BATCHES, 100, now_ms=0) == []
    assert sp.next_fetch_offset() is None
    assert sp.acquired_count() == 10


def test_accept_advances_start_release_redelivers() -> None:
    sp = SharePartition(CFG, 0)
    sp.acquire("a", BATCHES, 5, now_ms=0)
    assert sp.acknowledge("b", 0, 0, [AckType.ACCEPT]) is ErrorCode.INVALID_RECORD_STATE  # not b's
    assert sp.acknowledge("a", 0, 4, [1, 1, 2, 1, 1]) is ErrorCode.NONE
    assert sp.start_offset == 2 and sp.state_of(2)[0] is RecordState.AVAILABLE
    assert sp.next_fetch_offset() == 2
    assert ranges(sp.acquire("b", BATCHES, 1, now_ms=5)) == [(2, 2, 2)]
    assert sp.acknowledge("b", 2, 2, [AckType.ACCEPT]) is ErrorCode.NONE
    assert sp.start_offset == 5


def test_reject_archives() -> None:
    sp = SharePartition(CFG, 0)
    sp.acquire("a", BATCHES, 2, now_ms=0)
    assert sp.acknowledge("a", 0, 1, [AckType.REJECT]) is ErrorCode.NONE
    assert sp.start_offset == 2 and not sp.runs


def test_lock_expiry_with_fake_clock_and_delivery_limit() -> None:
    sp = SharePartition(CFG, 0)
    sp.acquire("a", BATCHES, 1, now_ms=0)
    assert sp.next_deadline_ms() == 1000
    assert sp.expire(999) == (False, False)
    assert sp.state_of(0)[0] is RecordState.ACQUIRED
    assert sp.expire(1000) == (True, False)
    assert sp.state_of(0)[0] is RecordState.AVAILABLE and sp.next_deadline_ms() is None
    assert ranges(sp.acquire("b", BATCHES, 1, now_ms=1500)) == [(0, 0, 2)]
    assert sp.acknowledge("a", 0, 0, [AckType.ACCEPT]) is ErrorCode.INVALID_RECORD_STATE  # a's lock is gone
    released, archived = sp.expire(2500)  # second delivery was the last one allowed
    assert released and archived and sp.start_offset == 1


def test_release_member_and_snapshot_round_trip() -> None:
    sp = SharePartition(CFG, 0)
    sp.acquire("a", BATCHES, 6, now_ms=0)
    sp.acknowledge("a", 1, 1, [AckType.ACCEPT])
    sp.acknowledge("a", 3, 3, [AckType.REJECT])
    assert sp.release_member("a")
    start, batches = sp.snapshot()
    assert start == 0
    restored = SharePartition(CFG, start, batches)
    assert restored.state_of(1)[0] is RecordState.ACKNOWLEDGED
    assert restored.state_of(3)[0] is RecordState.ARCHIVED
    assert restored.state_of(0) == (RecordState.AVAILABLE, 1)
    # accepted records are never acquired again after a restore
    got = {
        o
        for a in restored.acquire("b", BATCHES, 100, now_ms=0)
        for o in range(a.first_offset, a.last_offset + 1)
    }
    assert 1 not in got and 3 not in got and {0, 2, 4, 5} <= got


def test_manager_sessions_and_persisted_snapshots() -> None:
    store = ShareStateStore(4)
    m = ShareManager(CFG, store)
    t = uuid.UUID(int=9)
    key = ("g", t, 0)
    assert m.session_step("g", "a", 1, [], [])[0] is ErrorCode.SHARE_SESSION_NOT_FOUND
    error, session = m.session_step("g", "a", 0, [(t, 0)], [])
    assert error is ErrorCode.NONE and session is not None and list(session.partitions) == [(t, 0)]
    assert m.session_step("g", "a", 5, [], [])[0] is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    sp = m.partition(key, lambda: 0)
    sp.acquire("a", BATCHES, 4, now_ms=0)
    assert m.acknowledge(key, "a", [(0, 3, [1])]) is ErrorCode.NONE
    records = m.snapshot_records()
    assert len(records) == 1 and not m.dirty
    assert decode_snapshot_key(records[0].key) == key
    start, _batches, _epoch = decode_snapshot_value(records[0].value)
    assert start == 4
    fresh = ShareStateStore(4)
    fresh.load_partition(records[0].partition, [(r.key, r.value) for r in records], now_ms=0)
    assert fresh.get(key).start_offset == 4
    assert m.tick(10_000) is False
    sp.acquire("a", BATCHES, 1, now_ms=0)
    assert m.next_deadline_ms() == 1000 and m.tick(1000) is True


def test_per_offset_types_gaps_and_skipped_control_batches() -> None:
    sp = SharePartition(CFG, 0)
    got = ranges(sp.acquire("a", [(0, 3), (5, 6)], 100, now_ms=0, skipped=[(4, 4)]))
    assert got == [(0, 3, 1), (5, 6, 1)]  # the control batch at 4 is archived, never acquired
    assert sp.state_of(4) == (RecordState.ARCHIVED, 0)
    assert sp.acknowledge("a", 0, 3, [1, 2, 3, 0]) is ErrorCode.NONE
    assert sp.state_of(1) == (RecordState.AVAILABLE, 1) and sp.start_offset == 1
    assert sp.acknowledge("b", 4, 6, [0]) is ErrorCode.INVALID_RECORD_STATE  # 5, 6 are a's
    assert sp.acknowledge("a", 5, 6, [1]) is ErrorCode.NONE
    assert sp.next_fetch_offset() == 1 and sp.in_flight_count() == 6


def test_state_is_runs_not_records() -> None:
    sp = SharePartition(ShareConfig(1000, 5, 100_000), 0)
    sp.acquire("a", [(0, 49_999)], 50_000, now_ms=0)
    assert len(sp.runs) == 1 and sp.acquired_count() == 50_000
    sp.acknowledge("a", 0, 49_999, [AckType.ACCEPT])
    assert sp.runs == [] and sp.start_offset == 50_000


def test_batch_optimized_mode_takes_whole_log_batches_and_cuts_at_batch_size() -> None:
    sp = SharePartition(ShareConfig(1000, 5, 100), 0)
    # MaxRecords 6 ends inside the batch 5-9: the whole batch is acquired (Kafka's batch-optimized)
    assert ranges(sp.acquire("a", BATCHES, 6, now_ms=0, whole_batches=True)) == [(0, 9, 1)]
    sp = SharePartition(ShareConfig(1000, 5, 100), 0)
    got = sp.acquire("a", BATCHES, 100, now_ms=0, whole_batches=True, batch_size=5)
    assert ranges(got) == [(0, 4, 1), (5, 9, 1), (10, 19, 1)]  # cut only at log-batch starts
    sp = SharePartition(ShareConfig(1000, 5, 100), 0)
    assert ranges(sp.acquire("a", BATCHES, 6, now_ms=0)) == [(0, 5, 1)]  # record-limit mode


def test_skipped_batches_are_archived_even_when_in_flight() -> None:
    sp = SharePartition(CFG, 0)
    sp.acquire("a", [(0, 4)], 5, now_ms=0)
    assert sp.acknowledge("a", 0, 4, [AckType.RELEASE]) is ErrorCode.NONE  # available again
    # read again, now known as an aborted transaction's batch: archived, never acquired
    assert ranges(sp.acquire("b", [(5, 9)], 100, now_ms=0, skipped=[(0, 4)])) == [(5, 9, 1)]
    assert sp.state_of(0) is None and sp.start_offset == 5


def test_renew_restarts_the_lock_of_the_members_own_records() -> None:
    sp = SharePartition(CFG, 0)
    sp.acquire("a", BATCHES, 5, now_ms=0)
    assert sp.acknowledge("a", 0, 4, [AckType.RENEW]) is ErrorCode.INVALID_REQUEST  # no RENEW allowed
    assert sp.acknowledge("b", 0, 4, [AckType.RENEW], now_ms=500) is ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 0, 4, [AckType.RENEW], now_ms=500) is ErrorCode.NONE
    assert sp.next_deadline_ms() == 1500 and sp.expire(1000) == (False, False)
    assert sp.state_of(0) == (RecordState.ACQUIRED, 1)


def test_a_lock_that_ran_out_is_gone_before_its_timer_fires() -> None:
    """The lock timer may run late (a busy loop); an acknowledgement that arrives after the lock ran
    out is refused all the same, and the records are acquired again with the next delivery count."""
    m = ShareManager(CFG, ShareStateStore(4))
    key = ("g", uuid.UUID(int=7), 0)
    sp = m.partition(key, lambda: 0)
    sp.acquire("a", BATCHES, 5, now_ms=0)  # locked until 1000; no tick comes
    assert m.acknowledge(key, "a", [(0, 4, [AckType.ACCEPT])], 999) is ErrorCode.NONE  # in time
    sp.acquire("a", BATCHES, 5, now_ms=1000)  # 5-9, locked until 2000
    assert m.acknowledge(key, "a", [(5, 9, [AckType.ACCEPT])], 2000) is ErrorCode.INVALID_RECORD_STATE
    assert sp.state_of(5) == (RecordState.AVAILABLE, 1)
    assert ranges(sp.acquire("a", BATCHES, 5, now_ms=2001)) == [(5, 9, 2)]
    # RENEW still needs to be allowed
    assert m.acknowledge(key, "a", [(5, 9, [AckType.RENEW])], 2100) is ErrorCode.INVALID_REQUEST
    assert m.acknowledge(key, "a", [(5, 9, [AckType.RENEW])], 2100, renew=True) is ErrorCode.NONE
