"""Group API requests for the broker tests, spoken with our own codec over a real socket."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from harness import Client
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from test_produce_fetch import create

__all__ = ["create"]

SESSION_MS = 10000


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join_body(
    group: str,
    member_id: str = "",
    *,
    instance: str | None = None,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = SESSION_MS,
    topics: tuple[str, ...] = ("t",),
    protocol: str = "range",
) -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": protocol, "metadata": subscription(*topics)}],
        "reason": None,
    }


def find(c: Client, group: str) -> Any:
    """FindCoordinator, as every client does first (the first one creates __consumer_offsets)."""
    r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    assert r.error_code == 0, r
    return r


def join(c: Client, group: str, member_id: str = "", *, version: int = 5, **kw: Any) -> Any:
    return c.request(ApiKey.JOIN_GROUP, version, join_body(group, member_id, **kw))


def join_new(c: Client, group: str, *, version: int = 5, **kw: Any) -> Any:
    """A dynamic member's first join: v4+ answer MEMBER_ID_REQUIRED, then the member rejoins."""
    find(c, group)
    r = join(c, group, version=version, **kw)
    if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        r = join(c, group, r.member_id, version=version, **kw)
    return r


def send_join(c: Client, group: str, member_id: str = "", *, version: int = 5, **kw: Any) -> int:
    """Send a JoinGroup without waiting: it stays parked until the join phase completes."""
    return c.send(ApiKey.JOIN_GROUP, version, join_body(group, member_id, **kw))


def sync(
    c: Client,
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    *,
    version: int = 3,
    instance: str | None = None,
) -> Any:
    return c.request(
        ApiKey.SYNC_GROUP, version, sync_body(group, generation, member_id, assignments, instance)
    )


def sync_body(
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    instance: str | None = None,
) -> dict:
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }


def heartbeat(
    c: Client, group: str, generation: int, member_id: str, *, version: int = 4, instance: str | None = None
) -> int:
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
    }
    return int(c.request(ApiKey.HEARTBEAT, version, body).error_code)


def stable_member(c: Client, group: str, assignment: bytes = b"a", **kw: Any) -> tuple[str, int]:
    """Join a fresh group alone and sync: (member id, generation)."""
    r = join_new(c, group, **kw)
    assert r.error_code == 0, r
    s = sync(c, group, r.generation_id, r.member_id, {r.member_id: assignment}, instance=kw.get("instance"))
    assert s.error_code == 0 and s.assignment == assignment, s
    return r.member_id, r.generation_id


def describe(c: Client, *groups: str, version: int = 5) -> list[Any]:
    body = {"groups": list(groups), "include_authorized_operations": False}
    return list(c.request(ApiKey.DESCRIBE_GROUPS, version, body).groups)


def commit(
    c: Client,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    version: int = 8,
    metadata: str | None = "",
) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(
            {
                "partition_index": p,
                "committed_offset": o,
                "committed_leader_epoch": 3,
                "committed_metadata": metadata,
            }
        )
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    resp = c.request(ApiKey.OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_offsets(
    c: Client, group: str, partitions: dict[str, list[int]] | None, *, version: int = 7
) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    """(group error, {(topic, partition): (offset, partition error)}) through OffsetFetch < v8."""
    topics = (
        None if partitions is None else [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]
    )
    resp = c.request(
        ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": topics, "require_stable": True}
    )
    got = {
        (t.name, p.partition_index): (p.committed_offset, p.error_code)
        for t in resp.topics
        for p in t.partitions
    }
    return int(getattr(resp, "error_code", 0)), got


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
