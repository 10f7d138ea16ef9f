"""``ControllerClient``: what the broker side of a node asks of the active controller, as typed calls.

Internal callers (auto-created and internal topics, producer id blocks, registration and
heartbeats, ISR changes) build Kafka's controller requests here and read the answers; where the
active controller runs is the ``ControllerChannel``'s business.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import ApiKey, PylogApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.control.controller_channel import ControllerChannel, ControllerUnavailable
from pylog.cluster.controller import CreateTopicResult, NewTopic, ProducerIdsResult
from pylog.cluster.node_config import Listener
from pylog.cluster.records import SecurityProtocol

CREATE_TOPICS_VERSION = 7


@dataclass(frozen=True)
class HeartbeatAnswer:
    error_code: int
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


class ControllerClient:
    def __init__(self, channel: ControllerChannel, cluster_id: str) -> None:
        self.channel = channel
        self.cluster_id = cluster_id

    async def create_topics(self, topics: Sequence[NewTopic]) -> list[CreateTopicResult]:
        body = {
            "topics": [
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions if t.assignments is None else -1,
                    "replication_factor": t.replication_factor if t.assignments is None else -1,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(r)}
                        for p, r in (t.assignments or {}).items()
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
                }
                for t in topics
            ],
            "timeout_ms": int(self.channel.request_timeout_s * 1000),
            "validate_only": False,
        }
        try:
            resp = await self.channel.call(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, body)
        except ControllerUnavailable as exc:
            return [CreateTopicResult(t.name, ErrorCode.REQUEST_TIMED_OUT, str(exc)) for t in topics]
        return [
            CreateTopicResult(
                r.name,
                r.error_code,
                r.error_message,
                topic_id=r.topic_id,
                num_partitions=r.num_partitions,
                replication_factor=r.replication_factor,
            )
            for r in resp.topics
        ]

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int, count: int) -> ProducerIdsResult:
        """A block of producer ids (the controller decides the block size, Kafka's 1000)."""
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch}
        try:
            resp = await self.channel.call(ApiKey.ALLOCATE_PRODUCER_IDS, 0, body)
        except ControllerUnavailable as exc:
            return ProducerIdsResult(ErrorCode.REQUEST_TIMED_OUT, str(exc))
        return ProducerIdsResult(
            resp.error_code, None, first_producer_id=resp.producer_id_start, count=resp.producer_id_len
        )

    async def register_broker(
        self, broker_id: int, incarnation_id: uuid.UUID, listeners: Sequence[Listener], rack: str | None
    ) -> tuple[int, int]:
        """(error code, broker epoch)."""
        body = {
            "broker_id": broker_id,
            "cluster_id": self.cluster_id,
            "incarnation_id": incarnation_id,
            "listeners": [
                {
                    "name": li.name,
                    "host": li.host,
                    "port": li.port,
                    "security_protocol": int(SecurityProtocol[li.security_protocol]),
                }
                for li in listeners
            ],
            "features": [],
            "rack": rack,
        }
        resp = await self.channel.call(ApiKey.BROKER_REGISTRATION, 0, body)
        return resp.error_code, resp.broker_epoch

    async def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shutdown: bool,
        timeout_s: float,
    ) -> HeartbeatAnswer:
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "current_metadata_offset": metadata_offset,
            "want_fence": want_fence,
            "want_shut_down": want_shutdown,
        }
        resp = await self.channel.call(ApiKey.BROKER_HEARTBEAT, 0, body, timeout_s=timeout_s)
        return HeartbeatAnswer(resp.error_code, resp.is_caught_up, resp.is_fenced, resp.should_shut_down)

    async def alter_partition(self, broker_id: int, broker_epoch: int, topics: list[dict[str, Any]]) -> Any:
        """AlterPartition v3 with ``topics`` in the request's shape; the decoded response."""
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": topics}
        return await self.channel.call(ApiKey.ALTER_PARTITION, 3, body)

    async def remote_log_segment(
        self, broker_id: int, broker_epoch: int, changes: list[dict[str, Any]]
    ) -> Any:
        """PylogRemoteLogSegment with ``changes`` in the request's shape; the decoded response."""
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "changes": changes}
        return await self.channel.call(PylogApiKey.REMOTE_LOG_SEGMENT, 0, body)
