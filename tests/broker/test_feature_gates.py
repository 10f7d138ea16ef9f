"""Every API a finalized feature level turns on answers UNSUPPORTED_VERSION below it, in its own
response shape, and is served again once the level is back (over a real socket)."""

from __future__ import annotations

from typing import Any

from harness import Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.network.feature_gate import GATED

GATED_CALLS: list[tuple[int, int, dict]] = [
    (
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        0,
        {
            "group_id": "g",
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 1,
            "subscribed_topic_names": ["t"],
        },
    ),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g"]}),
    (
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        {"group_id": "g", "member_id": "m", "member_epoch": 0, "subscribed_topic_names": ["t"]},
    ),
    (ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": ["g"]}),
    (
        ApiKey.SHARE_FETCH,
        1,
        {
            "group_id": "g",
            "member_id": "m",
            "share_session_epoch": 0,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1,
            "topics": [],
            "forgotten_topics_data": [],
        },
    ),
    (
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        {"group_id": "g", "member_id": "m", "share_session_epoch": 1, "topics": []},
    ),
    (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": "g", "topics": None}]}),
    (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": []}),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": []}),
    (
        ApiKey.STREAMS_GROUP_HEARTBEAT,
        0,
        {"group_id": "g", "member_id": "m", "member_epoch": 5, "endpoint_information_epoch": 0},
    ),
    (ApiKey.STREAMS_GROUP_DESCRIBE, 0, {"group_ids": ["g"], "include_authorized_operations": False}),
]


def codes(body: Any) -> set[int]:
    out: set[int] = set()
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        for name in getattr(node, "_fields", ()):
            value = getattr(node, name)
            if name == "error_code":
                out.add(value)
            elif isinstance(value, list) or hasattr(value, "_fields"):
                stack.append(value)
    return out


def set_levels(client: Client, level_type: int, **levels: int) -> None:
    updates = [
        {"feature": name.replace("_", "."), "max_version_level": level, "upgrade_type": level_type}
        for name, level in levels.items()
    ]
    resp = client.request(ApiKey.UPDATE_FEATURES, 1, {"timeout_ms": 5000, "feature_updates": updates})
    assert resp.error_code == 0, resp.error_message


def test_gated_apis_answer_unsupported_version_below_their_level(client: Client) -> None:
    assert {k for k, _, _ in GATED_CALLS} == set(GATED)
    set_levels(client, 2, group_version=0, share_version=0, streams_version=0)  # safe downgrades
    for key, version, body in GATED_CALLS:
        assert ErrorCode.UNSUPPORTED_VERSION in codes(client.request(key, version, body)), ApiKey(key).name
    set_levels(client, 1, group_version=1, share_version=1, streams_version=1)
    for key, version, body in GATED_CALLS:
        assert ErrorCode.UNSUPPORTED_VERSION not in codes(client.request(key, version, body)), ApiKey(
            key
        ).name
