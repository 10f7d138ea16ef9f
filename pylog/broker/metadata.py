"""What request handlers need from the cluster metadata, in the broker's terms.

The cluster layer (Raft quorum + controller) owns the metadata log; the broker
reads the applied image through ``MetadataView`` and asks for changes through
its coroutines, which return only after the records are committed and applied.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pylog.protocol.errors import ErrorCode

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True)
class PartitionInfo:
    index: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    assignments: Mapping[int, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class Outcome:
    """A Kafka error code and message for one resource of an admin request."""

    error: int = 0
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == 0


OK = Outcome()


class MetadataView(Protocol):
    """The applied metadata image plus the controller operations the broker uses."""

    cluster_id: str
    controller_id: int

    def topic(self, name: str) -> TopicInfo | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    def topics(self) -> Mapping[str, TopicInfo]: ...

    def brokers(self) -> list[BrokerInfo]: ...

    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool) -> list[Outcome]: ...

    async def delete_topics(self, names: list[str]) -> list[Outcome]: ...

    async def create_partitions(
        self, requests: list[tuple[str, int]], *, validate_only: bool
    ) -> list[Outcome]: ...

    async def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace: bool, validate_only: bool
    ) -> Outcome: ...

    async def allocate_producer_ids(self, count: int) -> tuple[int, int]: ...


def validate_topic_name(name: str | None) -> Outcome:
    if not name:
        return Outcome(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is empty")
    if name in (".", ".."):
        return Outcome(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        return Outcome(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is longer than {MAX_TOPIC_LENGTH}")
    if not LEGAL_TOPIC.match(name):
        return Outcome(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )
    return OK
