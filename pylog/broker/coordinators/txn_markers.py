"""Transaction markers at partition leaders, here or on other brokers (WriteTxnMarkers).

A marker counts as written once the partition's in-sync replicas hold it (Kafka writes markers
with acks=all): a commit the coordinator completed must not vanish with a leader. Markers for
partitions led here are appended through ``ReplicaManager.append_txn_marker``; the others go to
their leader in one WriteTxnMarkers request per marker and broker, over connections of the
writer's own (a follower fetch queued behind a WriteTxnMarkers on a shared connection could not
tell the leader it had the marker). Each partition's outcome is reported to ``on_done``;
failures are retried by the transaction coordinator's shell.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.control.broker_channels import BrokerChannels
from pylog.broker.control.metadata import MetadataView
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.client.errors import TransportError

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
MarkerDone = Callable[[str, int, ErrorCode], None]  # topic, partition, outcome


class MarkerWriter:
    def __init__(
        self,
        node_id: int,
        replicas: ReplicaManager,
        metadata: MetadataView,
        channels: BrokerChannels | None,
        *,
        request_timeout_s: float,
    ) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.metadata = metadata
        self.channels = channels
        self.request_timeout_s = request_timeout_s
        self._sending: set[asyncio.Task[None]] = set()

    def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: list[tuple[str, int]],
        on_done: MarkerDone,
    ) -> None:
        remote: dict[int, list[tuple[str, int]]] = {}
        for topic, p in partitions:
            part = self.replicas.get(topic, p)
            if part is not None and part.is_leader:
                self.replicas.append_txn_marker(
                    topic,
                    p,
                    producer_id,
                    producer_epoch,
                    commit,
                    coordinator_epoch,
                    functools.partial(on_done, topic, p),
                )
                continue
            image = self.metadata.image.partition(topic, p)
            if image is None:
                on_done(topic, p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif image.leader < 0 or image.leader == self.node_id or self.channels is None:
                on_done(topic, p, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                remote.setdefault(image.leader, []).append((topic, p))
        for leader, parts in remote.items():
            task = asyncio.ensure_future(
                self._send(leader, producer_id, producer_epoch, commit, coordinator_epoch, parts, on_done)
            )
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(
        self,
        leader: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        parts: list[tuple[str, int]],
        on_done: MarkerDone,
    ) -> None:
        assert self.channels is not None
        by_topic: dict[str, list[int]] = {}
        for topic, p in parts:
            by_topic.setdefault(topic, []).append(p)
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": coordinator_epoch,
                }
            ]
        }
        answers: dict[tuple[str, int], int] = {}
        channel = self.channels.get(leader)
        try:
            if channel is None:
                raise TransportError(f"broker {leader} has no endpoint")
            resp = await channel.request(
                ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body, self.request_timeout_s
            )
            for m in resp.markers:
                for t in m.topics:
                    for p in t.partitions:
                        answers[(t.name, p.partition_index)] = p.error_code
        except TransportError as exc:
            log.debug("WriteTxnMarkers to %d: %s", leader, exc)
        for topic, p in parts:
            on_done(topic, p, ErrorCode.of(answers.get((topic, p), ErrorCode.REQUEST_TIMED_OUT)))

    def close(self) -> None:
        """Stop sending: requests under way are dropped with their connections."""
        for task in list(self._sending):
            task.cancel()
        if self.channels is not None:
            self.channels.close()


def written_markers(request: Any) -> list[tuple[int, int, bool, int, list[tuple[str, int]]]]:
    """(producer id, epoch, commit, coordinator epoch, partitions) of a WriteTxnMarkers request."""
    return [
        (
            m.producer_id,
            m.producer_epoch,
            bool(m.transaction_result),
            m.coordinator_epoch,
            [(t.name, p) for t in m.topics for p in t.partition_indexes],
        )
        for m in request.markers
    ]
