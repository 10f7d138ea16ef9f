"""CreateTopics: the controller validates and commits; the logs open when the records apply.

A topic needs CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED); its configs are
answered only with DESCRIBE_CONFIGS on it (else ``topic_config_error_code`` says why not).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import CreateTopicsRequest, CreateTopicsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.controller import CreateTopicResult, NewTopic
from pylog.cluster.quorum import MetadataQuorum
from pylog.config import BrokerConfig, ConfigType
from pylog.security.acl_operations import AclOperation, ResourceType


def _new_topic(t: Any) -> NewTopic:
    assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments or []} or None
    return NewTopic(
        t.name,
        t.num_partitions,
        t.replication_factor,
        assignments=assignments,
        configs={c.name: c.value for c in t.configs or []},
    )


def error_response(req: CreateTopicsRequest, code: int) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        topics=[
            CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=code, error_message=None)
            for t in req.topics
        ]
    )


@serves(ApiKey.CREATE_TOPICS, versions=(0, 7), error_response=error_response)
async def create_topics(
    ctx: RequestContext,
    req: CreateTopicsRequest,
    *,
    quorum: MetadataQuorum,
    config: BrokerConfig,
    authz: Authorization,
) -> CreateTopicsResponse:
    topics = [_new_topic(t) for t in req.topics]
    validate_only = bool(getattr(req, "validate_only", False))
    names = [t.name for t in topics]
    allowed = (
        set(names)
        if authz.cluster(ctx, AclOperation.CREATE)
        else authz.filter(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    )
    describable = authz.filter(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
    results = await quorum.execute(
        lambda c: c.create_topics([t for t in topics if t.name in allowed], validate_only=validate_only)
    )
    created = iter(results)
    results = [
        next(created) if t.name in allowed else CreateTopicResult(
            t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        )
        for t in topics
    ]
    cfg = config
    out = []
    for r in results:
        entry = CreateTopicsResponse.CreatableTopicResult(
            name=r.name,
            error_code=r.error_code,
            error_message=r.error_message,
            num_partitions=r.num_partitions,
            replication_factor=r.replication_factor,
        )  # configs stay empty unless described below, as Kafka's controller leaves them
        if r.topic_id is not None and not validate_only:
            entry.topic_id = r.topic_id
        if r.error_code == 0 and r.name not in describable:
            entry.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif r.error_code == 0:
            entry.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=c.name,
                    value=c.value,
                    read_only=c.read_only,
                    config_source=int(c.source),
                    is_sensitive=c.type is ConfigType.PASSWORD,
                )
                for c in cfg.describe_topic(r.configs)
            ]
        out.append(entry)
    return CreateTopicsResponse(throttle_time_ms=0, topics=out)
