"""The partition's transaction bookkeeping: open transactions bound the last stable offset,
aborted ones are indexed and reported to the fetches they overlap."""

from __future__ import annotations

from pylog.broker.datapath.producer_state import AbortedTxn, ProducerStateTable


def test_open_transactions_and_aborted_index() -> None:
    t = ProducerStateTable()
    t.record(1, 0, 0, 1, 10, 11, 0, is_transactional=True)
    t.record(2, 0, 0, 0, 12, 12, 0, is_transactional=True)
    t.record(1, 0, 2, 2, 13, 13, 0, is_transactional=True)
    assert t.first_open_transaction_offset() == 10
    assert t.end_transaction(1, 0, marker_offset=14, aborted=True) == 10
    assert t.first_open_transaction_offset() == 12
    assert t.end_transaction(2, 0, marker_offset=15, aborted=False) == 12
    assert t.first_open_transaction_offset() is None
    assert t.end_transaction(2, 0, marker_offset=16, aborted=True) is None  # a repeated marker
    assert t.aborted == [AbortedTxn(1, 10, 14)]
    t.record(3, 0, 0, 0, 20, 20, 0, is_transactional=True)
    t.end_transaction(3, 0, marker_offset=21, aborted=True)
    assert t.aborted_transactions(0, 100) == [AbortedTxn(1, 10, 14), AbortedTxn(3, 20, 21)]
    assert t.aborted_transactions(15, 100) == [AbortedTxn(3, 20, 21)]  # ended before the fetch
    assert t.aborted_transactions(0, 20) == [AbortedTxn(1, 10, 14)]  # starts after the fetched range
    assert t.aborted_transactions(14, 15) == [AbortedTxn(1, 10, 14)]
    t.truncate(15)
    assert t.aborted == [AbortedTxn(3, 20, 21)]


def test_a_fencing_marker_bumps_the_epoch() -> None:
    t = ProducerStateTable()
    t.record(1, 0, 0, 0, 0, 0, 0, is_transactional=True)
    t.record(1, 1, -1, -1, 1, 1, 0)  # the marker's batch, as a leader's append records it
    t.end_transaction(1, 1, marker_offset=1, aborted=True)
    assert t.check(1, 0, 1, 1).error == 47  # INVALID_PRODUCER_EPOCH
    assert t.check(1, 1, 0, 0).error == 0


def test_compaction_makes_the_index_forget_aborted_transactions() -> None:
    t = ProducerStateTable()
    for pid, first, marker in ((1, 0, 2), (2, 3, 4), (1, 5, 6)):
        t.record(pid, 0, 0, 0, first, first, 0, is_transactional=True)
        t.end_transaction(pid, 0, marker_offset=marker, aborted=True)
    t.forget_aborted((2, 6, 99))
    assert t.aborted == [AbortedTxn(2, 3, 4)]
    t.forget_aborted(())
    assert t.aborted_transactions(0, 10) == [AbortedTxn(2, 3, 4)]
