"""Idempotent producers: duplicates answered with their first offsets, gaps and fenced epochs refused."""

from __future__ import annotations

from harness import Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from records_util import make_batch, values_of
from test_produce_fetch import create, fetch, produce

from pylog.broker.datapath.producer_state import ProducerStateTable


def init_pid(client: Client) -> int:
    resp = client.request(
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1, "producer_epoch": -1},
    )
    assert resp.error_code == 0 and resp.producer_epoch == 0
    return resp.producer_id


def test_producer_ids_are_unique(client: Client) -> None:
    assert len({init_pid(client) for _ in range(5)}) == 5


def test_duplicate_gap_and_fencing(client: Client) -> None:
    create(client, "idem")
    pid = init_pid(client)

    def send(seq: int, values: list[bytes], epoch: int = 0) -> object:
        return produce(
            client, "idem", make_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        )

    assert send(0, [b"a", b"b"]).base_offset == 0
    assert send(2, [b"c"]).base_offset == 2
    dup = send(0, [b"a", b"b"])
    assert dup.error_code == 0 and dup.base_offset == 0
    assert send(2, [b"c"]).base_offset == 2
    assert send(7, [b"gap"]).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(3, [b"d"]).base_offset == 3
    # a new epoch starts at sequence 0; the old epoch is fenced from then on
    assert send(5, [b"x"], epoch=1).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(0, [b"e"], epoch=1).base_offset == 4
    assert send(4, [b"old"], epoch=0).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert values_of(fetch(client, "idem", 0).records) == [b"a", b"b", b"c", b"d", b"e"]


def test_state_table_wraps_sequences() -> None:
    t = ProducerStateTable()
    t.record(1, 0, 2147483640, 2147483647, 0, 7, 0)
    assert t.check(1, 0, 0, 3).error == 0
    assert t.check(1, 0, 1, 3).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check(1, 0, 2147483640, 2147483647).duplicate is not None
