"""What a fetch asks and what it answers (Kafka's FetchParams, FetchRequest.PartitionData,
FetchPartitionData): the plain types shared by the Fetch handler, the fetch planner and the fetch
reader, kept apart so none of them imports another to name a fetch."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pylog.broker.datapath.producer_state import AbortedTxn
from pylog.broker.datapath.wire_cache import WireBytes
from pylog.broker.tiered.remote_reads import RemoteFetch

NO_EPOCH = -1
CONSUMER = -1


class FetchIsolation(enum.Enum):
    """How far a fetch reads (Kafka's FetchIsolation)."""

    LOG_END = "log end"  # a follower's fetch
    HIGH_WATERMARK = "high watermark"  # a consumer's, read_uncommitted
    TXN_COMMITTED = "last stable offset"  # a consumer's, read_committed


@dataclass(slots=True)
class FetchParams:
    """What a Fetch request asks of all its partitions (Kafka's FetchParams)."""

    replica_id: int  # the fetching follower, or CONSUMER
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation
    # a consumer's rack_id (Fetch v11+, "" when unset); None: an older consumer, served by the
    # leader only (Kafka's ClientMetadata)
    client_rack: str | None = None

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def any_replica(self) -> bool:
        """A consumer fetch that a follower may serve too (KIP-392)."""
        return self.replica_id < 0 and self.client_rack is not None


class PartitionFetch(Protocol):
    """One partition of a Fetch request (Kafka's FetchRequest.PartitionData), as the request's own
    partition entries carry it (any object with these attributes)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int  # -1: not checked
    last_fetched_epoch: int  # a follower's: the epoch of its last batch (-1: none)
    log_start_offset: int  # a follower's


@dataclass(slots=True)
class FetchPosition:
    """A ``PartitionFetch`` built by hand (a fetch that does not come from the wire)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchPartitionData:
    """One partition of a fetch answer (Kafka's FetchPartitionData); sizes count wire bytes."""

    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Sequence[WireBytes] = ()
    # read_committed: the aborted transactions overlapping ``records`` (None: not asked)
    aborted_transactions: list[AbortedTxn] | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) for a follower to truncate
    current_leader: tuple[int, int] | None = None  # (id, epoch) with NOT_LEADER / FENCED
    preferred_read_replica: int = -1
    size: int = 0
    remote: RemoteFetch | None = None  # records still to be read from the remote tier
