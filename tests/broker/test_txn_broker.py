"""Transactions over a real socket: coordinator discovery, produce verification, last stable
offset, markers, aborted transactions in read_committed fetches, fencing, transactional offsets,
restart and timeout."""

from __future__ import annotations

import time
from pathlib import Path

from harness import BrokerThread, Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode as E
from records_util import make_batch
from test_produce_fetch import create, fetch, produce
from txn_helpers import (
    add_offsets,
    add_partitions,
    data_values,
    describe_txn,
    end_txn,
    find_txn_coordinator,
    init_txn,
    list_offsets_latest,
    offset_fetch,
    txn_batch,
    txn_offset_commit,
)

TXN = "tx-a"


def begin(c: Client, topic: str, txn: str = TXN) -> tuple[int, int]:
    r = init_txn(c, txn)
    assert r.error_code == 0, r
    assert add_partitions(c, txn, r.producer_id, r.producer_epoch, {topic: [0]}) == {(topic, 0): 0}
    return r.producer_id, r.producer_epoch


def committed_values(c: Client, topic: str, offset: int = 0) -> tuple[list[bytes], object]:
    p = fetch(c, topic, offset, isolation=1)
    return data_values(p.records), p


def test_find_coordinator_key_type_1(client: Client, broker: BrokerThread) -> None:
    r = find_txn_coordinator(client, TXN)
    assert (r.error_code, r.node_id, r.port) == (0, broker.broker.node_id, broker.address[1])
    assert find_txn_coordinator(client, "").error_code == E.INVALID_REQUEST
    resp = client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["a", "b"]})
    assert [(x.key, x.error_code) for x in resp.coordinators] == [("a", 0), ("b", 0)]


def test_commit_makes_records_visible_to_read_committed(client: Client) -> None:
    create(client, "tc")
    find_txn_coordinator(client, TXN)
    produce(client, "tc", make_batch([b"plain"]))
    pid, epoch = begin(client, "tc")
    assert produce(client, "tc", txn_batch([b"t1", b"t2"], pid, epoch, 0)).error_code == 0
    assert produce(client, "tc", txn_batch([b"t3"], pid, epoch, 2)).error_code == 0
    values, p = committed_values(client, "tc")
    assert values == [b"plain"] and p.last_stable_offset == 1 and p.high_watermark == 4
    assert data_values(fetch(client, "tc", 0).records) == [b"plain", b"t1", b"t2", b"t3"]
    assert list_offsets_latest(client, "tc", committed=True) == 1
    assert list_offsets_latest(client, "tc", committed=False) == 4
    assert describe_txn(client, TXN).transaction_state == "Ongoing"
    assert end_txn(client, TXN, pid, epoch, True) == 0
    values, p = committed_values(client, "tc")
    assert values == [b"plain", b"t1", b"t2", b"t3"]
    assert p.last_stable_offset == p.high_watermark == 5  # the marker takes offset 4
    assert list(p.aborted_transactions) == []
    assert describe_txn(client, TXN).transaction_state == "CompleteCommit"
    assert end_txn(client, TXN, pid, epoch, True) == 0  # retried EndTxn


def test_abort_lists_aborted_transactions_for_read_committed(client: Client) -> None:
    create(client, "ta")
    find_txn_coordinator(client, TXN)
    pid, epoch = begin(client, "ta")
    produce(client, "ta", txn_batch([b"x1", b"x2"], pid, epoch, 0))
    assert end_txn(client, TXN, pid, epoch, False) == 0
    produce(client, "ta", make_batch([b"after"]))
    values, p = committed_values(client, "ta")
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    assert values == [b"x1", b"x2", b"after"]  # the consumer drops them using the list
    assert p.last_stable_offset == 4
    assert fetch(client, "ta", 3, isolation=1).aborted_transactions == []  # past the abort
    assert fetch(client, "ta", 0).aborted_transactions is None  # read_uncommitted
    assert describe_txn(client, TXN).transaction_state == "CompleteAbort"


def test_produce_is_verified_against_the_transaction(client: Client) -> None:
    create(client, "tv", partitions=2)
    find_txn_coordinator(client, TXN)
    r = init_txn(client, TXN)
    pid, epoch = r.producer_id, r.producer_epoch
    assert produce(client, "tv", txn_batch([b"early"], pid, epoch, 0)).error_code == E.INVALID_TXN_STATE
    assert add_partitions(client, TXN, pid, epoch, {"tv": [0]}) == {("tv", 0): 0}
    assert produce(client, "tv", txn_batch([b"other"], pid, epoch, 0), partition=1).error_code == (
        E.INVALID_TXN_STATE
    )
    assert produce(client, "tv", txn_batch([b"ok"], pid, epoch, 0)).error_code == 0
    assert produce(client, "tv", txn_batch([b"x"], 987654, 0, 0)).error_code == E.INVALID_TXN_STATE
    errs = add_partitions(client, TXN, pid, epoch, {"tv": [0, 7], "nope": [0]})
    assert errs == {
        ("tv", 0): E.OPERATION_NOT_ATTEMPTED,
        ("tv", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_new_instance_fences_the_old_one(client: Client) -> None:
    create(client, "tf")
    find_txn_coordinator(client, TXN)
    pid, epoch = begin(client, "tf")
    produce(client, "tf", txn_batch([b"zombie"], pid, epoch, 0))
    r = init_txn(client, TXN)
    assert r.error_code == E.CONCURRENT_TRANSACTIONS  # the open transaction is being aborted
    r = init_txn(client, TXN)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)
    assert produce(client, "tf", txn_batch([b"late"], pid, epoch, 1)).error_code == E.INVALID_PRODUCER_EPOCH
    assert end_txn(client, TXN, pid, epoch, True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert end_txn(client, TXN, pid, epoch, True, version=3) == E.PRODUCER_FENCED
    old_epoch = {("tf", 0): E.INVALID_PRODUCER_EPOCH}
    assert add_partitions(client, TXN, pid, epoch, {"tf": [0]}, version=1) == old_epoch
    assert init_txn(client, TXN, version=3, pid=pid, epoch=epoch).error_code == E.INVALID_PRODUCER_EPOCH
    values, p = committed_values(client, "tf")
    assert values == [b"zombie"] and [a.first_offset for a in p.aborted_transactions] == [0]


def test_invalid_timeout_and_unknown_ids(client: Client) -> None:
    find_txn_coordinator(client, TXN)
    assert init_txn(client, TXN, timeout_ms=900001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert end_txn(client, "unknown", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert describe_txn(client, "unknown").error_code == E.TRANSACTIONAL_ID_NOT_FOUND


def test_transactional_offsets_count_on_commit_only(client: Client) -> None:
    create(client, "to")
    group = "txn-group"
    client.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    find_txn_coordinator(client, TXN)
    pid, epoch = begin(client, "to")
    tp = ("to", 0)
    assert txn_offset_commit(client, TXN, group, pid, epoch, {tp: 5}) == {tp: E.INVALID_TXN_STATE}
    assert add_offsets(client, TXN, pid, epoch, group) == 0
    assert txn_offset_commit(client, TXN, group, pid, epoch, {tp: 5}) == {tp: 0}
    assert offset_fetch(client, group, [tp], stable=False) == {tp: -1}
    assert offset_fetch(client, group, [tp], stable=True) == {tp: E.UNSTABLE_OFFSET_COMMIT}
    assert end_txn(client, TXN, pid, epoch, False) == 0
    assert offset_fetch(client, group, [tp], stable=True) == {tp: -1}
    assert add_offsets(client, TXN, pid, epoch, group) == 0
    assert txn_offset_commit(client, TXN, group, pid, epoch, {tp: 9}) == {tp: 0}
    assert end_txn(client, TXN, pid, epoch, True) == 0
    assert offset_fetch(client, group, [tp], stable=True) == {tp: 9}


def test_describe_producers_and_list_transactions(client: Client) -> None:
    create(client, "tp")
    find_txn_coordinator(client, TXN)
    pid, epoch = begin(client, "tp")
    produce(client, "tp", make_batch([b"a"]))
    produce(client, "tp", txn_batch([b"t"], pid, epoch, 0))
    body = {"topics": [{"name": "tp", "partition_indexes": [0, 5]}]}
    resp = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
    ok, missing = resp.topics[0].partitions
    assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    (prod,) = ok.active_producers
    assert (prod.producer_id, prod.producer_epoch, prod.last_sequence, prod.current_txn_start_offset) == (
        pid, epoch, 0, 1,
    )
    resp = client.request(ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": ["Ongoing", "Bogus"],
                                                         "producer_id_filters": [], "duration_filter": -1})
    assert resp.error_code == 0 and list(resp.unknown_state_filters) == ["Bogus"]
    assert [(t.transactional_id, t.producer_id) for t in resp.transaction_states] == [(TXN, pid)]


def test_restart_keeps_ongoing_transactions_and_the_aborted_index(tmp_path: Path) -> None:
    b = BrokerThread(tmp_path / "data").start()
    try:
        c = Client(b.address)
        create(c, "tr")
        find_txn_coordinator(c, "tx-ab")
        pid_ab, e_ab = begin(c, "tr", "tx-ab")
        produce(c, "tr", txn_batch([b"gone"], pid_ab, e_ab, 0))
        assert end_txn(c, "tx-ab", pid_ab, e_ab, False) == 0
        pid, epoch = begin(c, "tr")
        produce(c, "tr", txn_batch([b"kept"], pid, epoch, 0))
        c.close()
    finally:
        b.stop()
    b = BrokerThread(tmp_path / "data").start()
    try:
        c = Client(b.address)
        assert describe_txn(c, TXN).transaction_state == "Ongoing"
        values, p = committed_values(c, "tr")
        assert p.last_stable_offset == 2 and p.high_watermark == 3
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid_ab, 0)]
        assert produce(c, "tr", txn_batch([b"more"], pid, epoch, 1)).error_code == 0
        assert end_txn(c, TXN, pid, epoch, True) == 0
        values, p = committed_values(c, "tr", 2)
        assert values == [b"kept", b"more"] and p.last_stable_offset == p.high_watermark == 5
        c.close()
    finally:
        b.stop()


def test_timed_out_transaction_is_aborted_and_fenced(tmp_path: Path) -> None:
    b = BrokerThread(
        tmp_path / "data", {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"}
    ).start()
    try:
        c = Client(b.address)
        create(c, "tt")
        find_txn_coordinator(c, TXN)
        r = init_txn(c, TXN, timeout_ms=200)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, TXN, pid, epoch, {"tt": [0]}) == {("tt", 0): 0}
        produce(c, "tt", txn_batch([b"slow"], pid, epoch, 0))
        deadline = time.monotonic() + 30
        while describe_txn(c, TXN).transaction_state != "CompleteAbort" and time.monotonic() < deadline:
            time.sleep(0.05)
        state = describe_txn(c, TXN)
        assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", epoch + 1)
        assert end_txn(c, TXN, pid, epoch, True) == E.PRODUCER_FENCED
        _, p = committed_values(c, "tt")
        assert p.last_stable_offset == p.high_watermark == 2
        assert [a.first_offset for a in p.aborted_transactions] == [0]
        c.close()
    finally:
        b.stop()


def test_transaction_apis_are_advertised(client: Client) -> None:
    body = {"client_software_name": "t", "client_software_version": "1"}
    resp = client.request(ApiKey.API_VERSIONS, 3, body)
    table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    expected = {
        ApiKey.INIT_PRODUCER_ID: 4,
        ApiKey.ADD_PARTITIONS_TO_TXN: 3,
        ApiKey.ADD_OFFSETS_TO_TXN: 3,
        ApiKey.END_TXN: 3,
        ApiKey.TXN_OFFSET_COMMIT: 3,
        ApiKey.DESCRIBE_PRODUCERS: 0,
        ApiKey.DESCRIBE_TRANSACTIONS: 0,
        ApiKey.LIST_TRANSACTIONS: 1,
    }
    assert {k: table[k] for k in expected} == {k: (0, hi) for k, hi in expected.items()}
