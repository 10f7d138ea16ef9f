"""APIs turned on by a finalized feature level, as Kafka's KafkaApis gates them: the consumer group
protocol (KIP-848) needs ``group.version`` >= 1, share groups (KIP-932) ``share.version`` >= 1,
streams groups (KIP-1071) ``streams.version`` >= 1. The APIs stay advertised by ApiVersions whatever
the levels, as Kafka's are.
Below that level the API answers UNSUPPORTED_VERSION (before any authorization), in the shape its
response has: a top-level error, or one error per group asked about.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.access import api_acls as az
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import HandlerSpec
from pylog.cluster.features import GROUP_VERSION, SHARE_VERSION, STREAMS_VERSION, finalized_level
from pylog.cluster.image import MetadataImage

# API -> the feature level that turns it on.
GATED: dict[int, tuple[str, int]] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (GROUP_VERSION, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (GROUP_VERSION, 1),
    ApiKey.SHARE_GROUP_HEARTBEAT: (SHARE_VERSION, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (SHARE_VERSION, 1),
    ApiKey.SHARE_FETCH: (SHARE_VERSION, 1),
    ApiKey.SHARE_ACKNOWLEDGE: (SHARE_VERSION, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (SHARE_VERSION, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (SHARE_VERSION, 1),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (SHARE_VERSION, 1),
    ApiKey.STREAMS_GROUP_HEARTBEAT: (STREAMS_VERSION, 1),
    ApiKey.STREAMS_GROUP_DESCRIBE: (STREAMS_VERSION, 1),
}


def _per_group(req: Any, code: int) -> dict:
    """Consumer / Share / StreamsGroupDescribe: every group asked about gets ``code``."""
    return {"groups": [{"group_id": g, "error_code": code, "error_message": None} for g in req.group_ids]}


def _per_offsets_group(req: Any, code: int) -> dict:
    """DescribeShareGroupOffsets: every group asked about gets ``code``."""
    return {"groups": [{"group_id": g.group_id, "topics": [], "error_code": code} for g in req.groups]}


_ANSWERS: dict[int, Callable[[Any, int], dict]] = {
    ApiKey.CONSUMER_GROUP_DESCRIBE: _per_group,
    ApiKey.SHARE_GROUP_DESCRIBE: _per_group,
    ApiKey.STREAMS_GROUP_DESCRIBE: _per_group,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _per_offsets_group,
}


def gated(spec: HandlerSpec, image: Callable[[], MetadataImage]) -> HandlerSpec:
    """``spec`` answering UNSUPPORTED_VERSION while its feature is below the level it needs."""
    feature, level = GATED[spec.api_key]

    def check(ctx: RequestContext, req: Any) -> int | None:
        if finalized_level(image().features, feature) >= level:
            return None
        return ErrorCode.UNSUPPORTED_VERSION

    return az.requires(spec, check, _ANSWERS.get(spec.api_key, az.top_level))
