"""Configuration and the plain result types the transaction coordinator hands to the broker shell.

Results mirror Kafka's response fields (snake_case) so handlers copy them without translation.
Records reuse the group coordinator's `CoordinatorRecord` (partition, key, value): both
coordinators persist to a compacted internal topic the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog.groups.types import CoordinatorRecord
from pylog.model import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from pylog.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True)
class TxnConfig:
    """Broker settings of the transaction coordinator; Kafka names in `_KAFKA_NAMES`."""

    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_state_log_num_partitions: int = 50
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000

    _KAFKA_NAMES = {
        "transaction.max.timeout.ms": "transaction_max_timeout_ms",
        "transactional.id.expiration.ms": "transactional_id_expiration_ms",
        "transaction.state.log.num.partitions": "transaction_state_log_num_partitions",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": (
            "transaction_abort_timed_out_transaction_cleanup_interval_ms"
        ),
        "transaction.remove.expired.transaction.cleanup.interval.ms": (
            "transaction_remove_expired_transaction_cleanup_interval_ms"
        ),
    }

    @classmethod
    def from_kafka(cls, props: Mapping[str, str]) -> TxnConfig:
        """Build from broker properties; unrelated keys are ignored."""
        kwargs = {cls._KAFKA_NAMES[k]: int(v) for k, v in props.items() if k in cls._KAFKA_NAMES}
        return cls(**kwargs)


@dataclass(frozen=True)
class TxnMarkers:
    """Write a COMMIT or ABORT control batch for `producer_id` / `producer_epoch` to each partition,
    then report them with `TransactionCoordinator.markers_written`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class DescribedTransaction:
    error: ErrorCode
    transactional_id: str
    transaction_state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    transaction_state: str


@dataclass
class Output:
    """What one call produced.

    The shell appends `records` to `__transaction_state` first; only after that append succeeded
    does it send `response` and write `markers` (whose completion it reports back).
    """

    response: Any = None
    records: list[CoordinatorRecord] = field(default_factory=list)
    markers: list[TxnMarkers] = field(default_factory=list)

    def extend(self, other: Output) -> None:
        self.records.extend(other.records)
        self.markers.extend(other.markers)
