"""``ControllerClient``: what the broker side of a node asks of the active controller.

Internal callers (auto-created topics, internal topics, producer id blocks, broker registration)
use these typed calls instead of reaching into the quorum, so where the active controller runs
(this process or another node) is this class's business alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pylog.cluster.controller import (
    BrokerRegistrationResult,
    ControllerResult,
    CreateTopicResult,
    NewTopic,
    ProducerIdsResult,
    QuorumController,
)
from pylog.cluster.records import BrokerEndpoint

T = TypeVar("T")
Execute = Callable[[Callable[[QuorumController], ControllerResult[Any]]], Awaitable[Any]]


class ControllerClient:
    def __init__(self, execute: Execute) -> None:
        self._execute = execute

    async def create_topics(self, topics: Sequence[NewTopic]) -> list[CreateTopicResult]:
        result: list[CreateTopicResult] = await self._execute(lambda c: c.create_topics(topics))
        return result

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int, count: int) -> ProducerIdsResult:
        result: ProducerIdsResult = await self._execute(
            lambda c: c.allocate_producer_ids(broker_id, broker_epoch, count)
        )
        return result

    async def register_broker(
        self, broker_id: int, incarnation_id: Any, endpoints: Sequence[BrokerEndpoint], rack: str | None
    ) -> BrokerRegistrationResult:
        result: BrokerRegistrationResult = await self._execute(
            lambda c: c.register_broker(broker_id, incarnation_id, endpoints, rack)
        )
        return result
