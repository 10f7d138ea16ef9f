"""The sans-IO transaction coordinator: producer ids and epochs, the two-phase commit, fencing,
timeouts, expiry, records and replay. Time is explicit; nothing sleeps."""

from __future__ import annotations

import pytest
from pylog.protocol.errors import ErrorCode as E
from txn_support import MINUTE, TXN, Shell

from pylog.txn import TransactionCoordinator, TxnConfig, TxnState
from pylog.txn.records import (
    decode_transaction_log_key,
    decode_transaction_log_value,
    partition_for,
    transaction_log_key,
)

T0 = ("t", 0)
T1 = ("t", 1)
S = TxnState


def begin(s: Shell, *parts, txn: str = TXN):
    r = s.init(txn)
    assert r.error == E.NONE
    assert s.add(r.producer_id, r.producer_epoch, *(parts or (T0,)), txn=txn) == E.NONE
    return r.producer_id, r.producer_epoch


# ---------------------------------------------------------------------------- InitProducerId


def test_init_allocates_a_producer_id_and_bumps_the_epoch_each_time():
    s = Shell()
    first = s.init()
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, 1000, 0)
    assert s.state() is S.EMPTY
    second = s.init()
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    assert s.init(txn="other").producer_id == 1001


def test_init_validates_the_request():
    s = Shell(config=TxnConfig(transaction_max_timeout_ms=10_000))
    assert s.init(timeout=10_001).error == E.INVALID_TRANSACTION_TIMEOUT
    assert s.init(timeout=0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert s.init(timeout=10_000).error == E.NONE
    assert s.init(txn="").error == E.INVALID_REQUEST
    assert s.init(timeout=1000, pid=5, epoch=-1).error == E.INVALID_REQUEST


def test_old_incarnation_is_fenced_everywhere():
    s = Shell()
    old = s.init()
    new = s.init()
    assert new.producer_epoch == old.producer_epoch + 1
    assert s.add(old.producer_id, old.producer_epoch, T0) == E.PRODUCER_FENCED
    assert s.add(new.producer_id, new.producer_epoch, T0) == E.NONE
    assert s.end(old.producer_id, old.producer_epoch, True) == E.PRODUCER_FENCED
    assert s.c.verify_produce(old.producer_id, old.producer_epoch, T0) == E.INVALID_PRODUCER_EPOCH
    assert s.c.verify_produce(new.producer_id, new.producer_epoch, T0) == E.NONE


def test_init_with_producer_id_and_epoch_kip_360():
    s = Shell()
    r = s.init()
    again = s.init(pid=r.producer_id, epoch=r.producer_epoch)
    assert (again.error, again.producer_epoch) == (E.NONE, r.producer_epoch + 1)
    # The answer was lost and the producer retries with the same epoch: same epoch back.
    retry = s.init(pid=r.producer_id, epoch=r.producer_epoch)
    assert (retry.error, retry.producer_epoch) == (E.NONE, again.producer_epoch)
    # Another instance bumps without an expected epoch: the older one is fenced.
    s.init()
    assert s.init(pid=r.producer_id, epoch=again.producer_epoch).error == E.PRODUCER_FENCED
    assert s.init(pid=4242, epoch=0).error == E.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id():
    s = Shell()
    r = s.init()
    md = s.c.transaction(TXN)
    assert md is not None
    md.producer_epoch = 32766
    rotated = s.init(pid=r.producer_id, epoch=32766)
    assert (rotated.error, rotated.producer_epoch) == (E.NONE, 0)
    assert rotated.producer_id != r.producer_id
    assert s.c.transactional_id_of(rotated.producer_id) == TXN
    assert s.c.transactional_id_of(r.producer_id) is None
    # A retry with the old id and exhausted epoch gets the same answer.
    retry = s.init(pid=r.producer_id, epoch=32766)
    assert (retry.producer_id, retry.producer_epoch) == (rotated.producer_id, 0)


def test_init_on_an_ongoing_transaction_aborts_it_then_bumps_twice():
    s = Shell(auto_markers=False)
    pid, epoch = begin(s, T0, T1)
    r = s.init()
    assert r.error == E.CONCURRENT_TRANSACTIONS
    assert s.state() is S.PREPARE_ABORT
    (m,) = s.markers
    assert (m.producer_id, m.producer_epoch, m.commit, m.partitions) == (pid, epoch + 1, False, (T0, T1))
    assert s.init().error == E.CONCURRENT_TRANSACTIONS  # markers not written yet
    s.write_markers()
    assert s.state() is S.COMPLETE_ABORT
    r = s.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)


# ---------------------------------------------------------------------------- AddPartitions / EndTxn


def test_commit_writes_prepare_markers_then_complete():
    s = Shell(auto_markers=False)
    pid, epoch = begin(s, T0)
    assert s.state() is S.ONGOING
    assert s.add(pid, epoch, T0) == E.NONE  # already in: no record
    n = len(s.log)
    assert s.add(pid, epoch, T1) == E.NONE
    assert len(s.log) == n + 1
    assert s.add_offsets(pid, epoch, 3) == E.NONE
    assert s.end(pid, epoch, True) == E.NONE
    assert s.state() is S.PREPARE_COMMIT
    (m,) = s.markers
    assert m.commit and set(m.partitions) == {T0, T1, ("__consumer_offsets", 3)}
    assert m.coordinator_epoch == 0
    assert s.end(pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert s.end(pid, epoch, False) == E.INVALID_TXN_STATE
    assert s.add(pid, epoch, T0) == E.CONCURRENT_TRANSACTIONS
    # Markers may complete partition by partition.
    s.absorb(s.c.markers_written(TXN, pid, epoch, [T0], now_ms=s.now))
    assert s.state() is S.PREPARE_COMMIT
    s.markers = []
    s.absorb(s.c.markers_written(TXN, pid, epoch, m.partitions, now_ms=s.now))
    assert s.state() is S.COMPLETE_COMMIT
    md = s.c.transaction(TXN)
    assert md is not None and not md.partitions
    assert s.end(pid, epoch, True) == E.NONE  # a retry of the answered EndTxn
    assert s.end(pid, epoch, False) == E.INVALID_TXN_STATE
    states = [decode_transaction_log_value(v).state for _, _, v in s.log if v is not None]
    assert states == [S.EMPTY, S.ONGOING, S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


def test_next_transaction_restarts_the_clock_and_the_partition_set():
    s = Shell()
    pid, epoch = begin(s, T0)
    assert s.end(pid, epoch, False) == E.NONE
    assert s.state() is S.COMPLETE_ABORT
    s.now += 5000
    assert s.add(pid, epoch, T1) == E.NONE
    md = s.c.transaction(TXN)
    assert md is not None
    assert md.partitions == {T1} and md.start_timestamp_ms == s.now
    assert s.c.verify_produce(pid, epoch, T0) == E.INVALID_TXN_STATE
    assert s.c.verify_produce(pid, epoch, T1) == E.NONE


def test_errors_for_unknown_ids_wrong_producers_and_empty_transactions():
    s = Shell()
    assert s.add(1, 0, T0, txn="nope") == E.INVALID_PRODUCER_ID_MAPPING
    assert s.end(1, 0, True, txn="nope") == E.INVALID_PRODUCER_ID_MAPPING
    r = s.init()
    assert s.add(r.producer_id + 1, 0, T0) == E.INVALID_PRODUCER_ID_MAPPING
    assert s.end(r.producer_id, r.producer_epoch, True) == E.INVALID_TXN_STATE  # nothing begun
    assert s.add(r.producer_id, r.producer_epoch, T0, txn="") == E.INVALID_REQUEST
    assert s.c.verify_produce(999, 0, T0) == E.INVALID_TXN_STATE


def test_ongoing_transaction_without_partitions_completes_at_once():
    s = Shell(auto_markers=False)
    r = s.init()
    assert s.add(r.producer_id, r.producer_epoch) == E.NONE
    assert s.end(r.producer_id, r.producer_epoch, True) == E.NONE
    assert s.markers == [] and s.state() is S.COMPLETE_COMMIT


def test_stale_marker_reports_are_ignored():
    s = Shell(auto_markers=False)
    pid, epoch = begin(s)
    s.end(pid, epoch, True)
    n = len(s.log)
    assert not s.c.markers_written(TXN, pid, epoch + 1, [T0], now_ms=s.now).records
    assert not s.c.markers_written("other", pid, epoch, [T0], now_ms=s.now).records
    assert len(s.log) == n and s.state() is S.PREPARE_COMMIT
    assert [m.partitions for m in s.c.pending_markers()] == [(T0,)]


# ---------------------------------------------------------------------------- timers


def test_timeout_fences_and_aborts_on_the_check_interval():
    s = Shell(config=TxnConfig(transaction_abort_timed_out_transaction_cleanup_interval_ms=1000))
    s.absorb(s.c.tick(s.now))  # arms the periodic checks
    r = s.init(timeout=5000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert s.add(pid, epoch, T0) == E.NONE
    s.advance(5000)  # start + timeout is not yet in the past
    assert s.state() is S.ONGOING
    s.advance(1000)
    assert s.state() is S.COMPLETE_ABORT
    md = s.c.transaction(TXN)
    assert md is not None and md.producer_epoch == epoch + 1
    assert s.end(pid, epoch, True) == E.PRODUCER_FENCED
    assert s.add(pid, epoch, T0) == E.PRODUCER_FENCED
    # The fenced producer may not simply resume with its epoch either.
    assert s.init(pid=pid, epoch=epoch).error == E.PRODUCER_FENCED
    assert s.init().producer_epoch == epoch + 2


def test_next_deadline_follows_the_check_intervals():
    cfg = TxnConfig(
        transaction_abort_timed_out_transaction_cleanup_interval_ms=10,
        transaction_remove_expired_transaction_cleanup_interval_ms=50,
    )
    s = Shell(config=cfg)
    assert s.c.next_deadline_ms() is None
    s.absorb(s.c.tick(s.now))
    assert s.c.next_deadline_ms() == s.now + 10
    s.advance(10)
    assert s.c.next_deadline_ms() == s.now + 10


def test_idle_transactional_ids_expire_with_a_tombstone():
    cfg = TxnConfig(
        transactional_id_expiration_ms=MINUTE, transaction_remove_expired_transaction_cleanup_interval_ms=1000
    )
    s = Shell(config=cfg)
    s.absorb(s.c.tick(s.now))
    r = s.init(timeout=10 * MINUTE)
    pid = r.producer_id
    assert s.add(pid, r.producer_epoch, T0) == E.NONE
    s.advance(2 * MINUTE)  # Ongoing never expires (it times out instead)
    assert s.c.transaction(TXN) is not None
    s.init(txn="idle")
    s.advance(MINUTE + 1000)
    assert s.c.transaction("idle") is None
    assert s.log[-1][1] == transaction_log_key("idle") and s.log[-1][2] is None
    assert s.c.transactional_id_of(pid) == TXN


# ---------------------------------------------------------------------------- records and replay


def test_record_codec_round_trips_and_partitioning_matches_kafka():
    assert decode_transaction_log_key(transaction_log_key("tx-é")) == "tx-é"
    # Kafka: Utils.abs("my-txn".hashCode) % 50
    assert partition_for("my-txn", 50) == abs(-1061187895) % 50
    s = Shell()
    pid, epoch = begin(s, T0, ("u", 7))
    _, _, value = s.log[-1]
    assert value is not None
    v = decode_transaction_log_value(value)
    assert (v.producer_id, v.producer_epoch, v.state, v.timeout_ms) == (pid, epoch, S.ONGOING, MINUTE)
    assert v.partitions == {T0, ("u", 7)} and v.start_timestamp_ms == s.now
    # Empty writes a null partition list, as Kafka does.
    empty = next(v for _, _, v in s.log if v is not None)
    assert value[:2] == b"\x00\x00"
    assert decode_transaction_log_value(empty).partitions == frozenset()


def test_replay_restores_ongoing_transactions_and_fencing():
    s = Shell()
    pid, epoch = begin(s, T0)
    s.init(txn="done")
    s.restart()
    md = s.c.transaction(TXN)
    assert md is not None and md.state is S.ONGOING and md.partitions == {T0}
    assert s.c.verify_produce(pid, epoch, T0) == E.NONE
    assert s.end(pid, epoch, True) == E.NONE
    assert s.state() is S.COMPLETE_COMMIT
    assert s.c.transaction("done") is not None
    r = s.init()
    assert (r.producer_id, r.producer_epoch) == (pid, epoch + 1)


def test_replay_redrives_markers_of_a_preparing_transaction():
    s = Shell(auto_markers=False)
    pid, epoch = begin(s, T0, T1)
    s.end(pid, epoch, False)
    s.markers = []
    out = s.restart()
    (m,) = out.markers
    assert (m.commit, m.partitions, m.coordinator_epoch) == (False, (T0, T1), 1)
    assert s.state() is S.PREPARE_ABORT
    s.write_markers()
    assert s.state() is S.COMPLETE_ABORT


def test_replay_drops_tombstoned_ids_and_ongoing_ones_still_time_out():
    cfg = TxnConfig(
        transactional_id_expiration_ms=MINUTE,
        transaction_remove_expired_transaction_cleanup_interval_ms=1000,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=1000,
    )
    s = Shell(config=cfg)
    s.absorb(s.c.tick(s.now))
    s.init(txn="idle")
    s.advance(MINUTE + 1000)
    begin(s, T0)
    s.restart()
    assert s.c.transaction("idle") is None
    s.advance(MINUTE + 1000)
    assert s.state() is S.COMPLETE_ABORT


def test_loading_and_ownership_errors():
    c = TransactionCoordinator(allocate_producer_id=lambda: 1, owned_partitions=())
    p = c.partition_for(TXN)
    assert c.init_producer_id(TXN, MINUTE, now_ms=0).response.error == E.NOT_COORDINATOR
    c.mark_loading(p)
    assert c.init_producer_id(TXN, MINUTE, now_ms=0).response.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.list_transactions(now_ms=0)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    c.load_partition(p, [], now_ms=0)
    assert c.init_producer_id(TXN, MINUTE, now_ms=0).response.error == E.NONE
    c.unload_partition(p)
    assert c.transaction(TXN) is None
    assert c.end_txn(TXN, 1, 0, True, now_ms=0).response == E.NOT_COORDINATOR


# ---------------------------------------------------------------------------- describe / list


def test_describe_and_list_transactions():
    s = Shell()
    pid, epoch = begin(s, T1, T0, ("u", 2))
    s.init(txn="idle")
    (d, missing, bad) = s.c.describe_transactions([TXN, "missing", ""])
    assert (d.error, d.transaction_state, d.producer_id, d.producer_epoch) == (E.NONE, "Ongoing", pid, epoch)
    assert d.topics == (("t", (0, 1)), ("u", (2,))) and d.transaction_start_time_ms == s.now
    assert missing.error == E.TRANSACTIONAL_ID_NOT_FOUND and bad.error == E.INVALID_REQUEST
    err, listed = s.c.list_transactions(now_ms=s.now)
    assert err == E.NONE and {t.transactional_id for t in listed} == {TXN, "idle"}
    assert [t.transactional_id for t in s.c.list_transactions(["ongoing"], now_ms=s.now)[1]] == [TXN]
    assert s.c.list_transactions(["NoSuchState"], now_ms=s.now)[1] == []
    assert [t.transaction_state for t in s.c.list_transactions((), [pid], now_ms=s.now)[1]] == ["Ongoing"]
    s.now += 100
    assert [t.transactional_id for t in s.c.list_transactions(["Ongoing"], (), 50, now_ms=s.now)[1]] == [TXN]
    assert s.c.list_transactions(["Ongoing"], (), 500, now_ms=s.now)[1] == []


@pytest.mark.parametrize("commit", [True, False])
def test_transition_table_rejects_illegal_moves(commit):
    s = Shell()
    r = s.init()
    md = s.c.transaction(TXN)
    assert md is not None
    with pytest.raises(AssertionError):
        md.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert s.end(r.producer_id, r.producer_epoch, commit) == E.INVALID_TXN_STATE
