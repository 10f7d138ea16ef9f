"""Transaction states (Kafka's ids and names) and the metadata kept per transactional id."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from pylog.model import INT16_MAX, NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from pylog.txn.types import TopicPartition


class TxnState(IntEnum):
    """Ids as stored in `__transaction_state`; `kafka_name` is what DescribeTransactions shows."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        for s, n in _NAMES.items():
            if n.lower() == name.lower():
                return s
        return None


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_E, _O = TxnState.EMPTY, TxnState.ONGOING
_PC, _PA = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
_CC, _CA = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
_FENCE = TxnState.PREPARE_EPOCH_FENCE

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _E: frozenset({_E, _CC, _CA}),
    _O: frozenset({_O, _E, _CC, _CA}),
    _PC: frozenset({_O}),
    _PA: frozenset({_O, _FENCE}),
    _CC: frozenset({_PC}),
    _CA: frozenset({_PA}),
    TxnState.DEAD: frozenset({_E, _CC, _CA}),
    _FENCE: frozenset({_O}),
}

EXPIRABLE = frozenset({_E, _CC, _CA})
COMPLETE = frozenset({_E, _CC, _CA})
PREPARE = frozenset({_PC, _PA})


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka rotates the producer id before the epoch can overflow int16 (one bump is kept for a fence)."""
    return epoch >= INT16_MAX - 1


@dataclass
class TransactionMetadata:
    """What the coordinator knows about one transactional id.

    `last_producer_id` / `last_producer_epoch` recognise a retried InitProducerId whose answer was
    lost (memory only, as in Kafka's v0 log value). `pending_markers` are the partitions of a
    PrepareCommit / PrepareAbort transaction whose marker is not written yet.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_markers: set[TopicPartition] = field(default_factory=set)

    def transition(self, state: TxnState) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise AssertionError(
                f"transactional id {self.transactional_id!r}: illegal transition {self.state.kafka_name} "
                f"-> {state.kafka_name}"
            )
        self.state = state

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)
