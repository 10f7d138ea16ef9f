"""What a client knows of the cluster: brokers, partition leaders and group coordinators.

The cache is filled from Metadata and FindCoordinator answers and emptied of an entry when a
broker says it is stale (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR): the next call asks again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pylog.protocol.errors import ErrorCode

STALE_LEADER = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                          ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH})
STALE_COORDINATOR = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


@dataclass
class PartitionMetadata:
    partition: int
    leader: int
    error_code: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()


@dataclass
class TopicMetadata:
    name: str
    error_code: int
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    is_internal: bool = False
    topic_id: Any = None


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]
    topics: dict[str, TopicMetadata]
    cluster_id: str | None = None
    controller_id: int = -1
    racks: dict[int, str | None] = field(default_factory=dict)


def from_response(resp: Any) -> ClusterMetadata:
    """A Metadata response as `ClusterMetadata`."""
    topics = {}
    for t in resp.topics:
        tm = TopicMetadata(t.name, t.error_code, is_internal=bool(getattr(t, "is_internal", False)),
                           topic_id=getattr(t, "topic_id", None))
        for p in t.partitions:
            tm.partitions[p.partition_index] = PartitionMetadata(
                p.partition_index, p.leader_id, p.error_code, tuple(p.replica_nodes), tuple(p.isr_nodes))
        topics[t.name] = tm
    return ClusterMetadata(
        {b.node_id: (b.host, b.port) for b in resp.brokers}, topics,
        getattr(resp, "cluster_id", None), getattr(resp, "controller_id", -1),
        {b.node_id: getattr(b, "rack", None) for b in resp.brokers})


class MetadataCache:
    """Brokers' addresses, topics' partitions and leaders, and coordinators, as last seen."""

    def __init__(self) -> None:
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node id

    def update(self, md: ClusterMetadata) -> None:
        self.brokers.update(md.brokers)
        self.topics.update(md.topics)

    def leader(self, topic: str, partition: int) -> int | None:
        tm = self.topics.get(topic)
        pm = tm.partitions.get(partition) if tm is not None else None
        return pm.leader if pm is not None and pm.leader >= 0 else None

    def forget_topic(self, topic: str) -> None:
        self.topics.pop(topic, None)
