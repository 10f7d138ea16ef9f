"""DescribeTopicPartitions (KIP-966): topics and their partitions in pages, as Kafka 3.8+ admin
clients describe topics.

Topics are served in name order, from the request's cursor (a topic and the partition to start
at), at most ``response_partition_limit`` partitions per answer (capped by
``max.request.partition.size.limit``); when the limit cuts a topic or leaves topics out, the answer
carries ``next_cursor``. An empty topic list means every topic (missing or unauthorized ones are
then left out silently); named topics that are missing answer UNKNOWN_TOPIC_OR_PARTITION, those
the caller may not DESCRIBE TOPIC_AUTHORIZATION_FAILED. A cursor on a topic the list does not
name, or on a negative partition, is INVALID_REQUEST, as Kafka throws it.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from pylog.protocol.schema import ZERO_UUID

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import INTERNAL_TOPICS, MetadataView
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.controller import validate_topic_name
from pylog.config import BrokerConfig
from pylog.security.acl_operations import AclOperation, ResourceType, authorized_operations

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition


class InvalidRequest(Exception):
    pass


@serves(ApiKey.DESCRIBE_TOPIC_PARTITIONS, versions=(0, 0))
def describe_topic_partitions(
    ctx: RequestContext,
    req: DescribeTopicPartitionsRequest,
    *,
    metadata: MetadataView,
    config: BrokerConfig,
    authz: Authorization,
) -> DescribeTopicPartitionsResponse:
    try:
        return _describe(ctx, req, metadata, config, authz)
    except InvalidRequest:  # Kafka fails the whole request (every topic asked gets the error)
        return DescribeTopicPartitionsResponse(
            throttle_time_ms=0,
            topics=[_error_topic(t.name, ErrorCode.INVALID_REQUEST) for t in req.topics],
            next_cursor=None,
        )


def _describe(
    ctx: RequestContext,
    req: DescribeTopicPartitionsRequest,
    md: MetadataView,
    config: BrokerConfig,
    authz: Authorization,
) -> DescribeTopicPartitionsResponse:
    everything = not req.topics
    cursor = req.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    if everything:
        names = {n for n in md.image.topics if n >= start_name}
    else:
        names = {t.name for t in req.topics if t.name >= start_name}
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequest(f"the topic list should contain the cursor topic: {cursor.topic_name}")
    if cursor is not None and cursor.partition_index < 0:
        raise InvalidRequest(f"the cursor partition must be valid: {cursor}")
    allowed = [n for n in sorted(names) if authz.topic(ctx, AclOperation.DESCRIBE, n)]
    refused = [] if everything else [n for n in sorted(names) if n not in set(allowed)]
    limit = max(min(config.int("max.request.partition.size.limit"), req.response_partition_limit), 1)
    live = {b[0] for b in md.brokers()}
    topics: list[Topic] = []
    next_cursor: DescribeTopicPartitionsResponse.Cursor | None = None
    remaining = limit
    for name in allowed:
        if remaining <= 0:  # the next page starts with this topic
            next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=0)
            break
        topic = md.topic(name)
        if topic is None:
            if not everything:
                code, _ = validate_topic_name(name)
                topics.append(_error_topic(name, code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        parts = md.partitions(topic)
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        page = [p for p in parts if p.partition_id >= first][:remaining]
        topics.append(
            Topic(
                error_code=0,
                name=name,
                topic_id=topic.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=[
                    Partition(
                        error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader not in live else 0,
                        partition_index=p.partition_id,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=list(p.replicas),
                        isr_nodes=list(p.isr),
                        # no ELR in pylog: empty lists, as a Kafka broker sends them then
                        eligible_leader_replicas=[],
                        last_known_elr=[],
                        offline_replicas=[r for r in p.replicas if r not in live],
                    )
                    for p in page
                ],
                topic_authorized_operations=authorized_operations(
                    ResourceType.TOPIC, authz.allowed(ctx, ResourceType.TOPIC, name)
                ),
            )
        )
        remaining -= len(page)
        after = [p for p in parts if p.partition_id >= first][len(page) :]
        if after:
            next_cursor = DescribeTopicPartitionsResponse.Cursor(
                topic_name=name, partition_index=after[0].partition_id
            )
            break
    topics += [_error_topic(n, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in refused]
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def _error_topic(name: str, code: int) -> Topic:
    return Topic(
        error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[]
    )
