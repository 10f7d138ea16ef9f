"""A consumer group's committed offsets, read and written as Kafka's standalone consumers do.

A consumer that assigns itself partitions (no JoinGroup) still stores its position in a group:
FindCoordinator, then OffsetFetch / OffsetCommit with generation -1 and no member id. The
coordinator accepts that while the group has no members, and answers UNKNOWN_MEMBER_ID or
ILLEGAL_GENERATION when consumers have joined it; that is turned into an error saying so.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pylog.protocol import api
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.sdk.client import KafkaClient, KafkaError

GROUP_KEY = 0
# versions spoken (each has the one-group request shape used here); the broker must offer them
FIND_COORDINATOR_V = 3
OFFSET_FETCH_V = 7
OFFSET_COMMIT_V = 8
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})
_RETRIES = 50
_BACKOFF_S = 0.1


class GroupHasMembersError(RuntimeError):
    """The group has members (consumers that joined it), so a standalone commit is refused."""


class GroupOffsets:
    """Committed offsets of `group` through `client` (coroutines, on the SDK's I/O loop)."""

    def __init__(self, client: KafkaClient, group: str) -> None:
        if not isinstance(group, str) or not group:
            raise ValueError(f"group must be a non-empty string, got {group!r}")
        self.client = client
        self.group = group
        self._coordinator: int | None = None
        self._checked = False

    async def _check_versions(self) -> None:
        if self._checked:
            return
        offered = (await self.client.any_connection()).versions  # its ApiVersions answer
        codec = api.supported_versions()
        for key, version in ((ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_V),
                             (ApiKey.OFFSET_FETCH, OFFSET_FETCH_V), (ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_V)):
            lo, hi = offered.get(key, (0, -1))
            c_lo, c_hi = codec.get(key, (0, -1))
            if not (lo <= version <= hi and c_lo <= version <= c_hi):
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"{ApiKey(key).name} v{version}",
                                 "the broker does not offer it (needed for group offsets)")
        self._checked = True

    async def _coordinator_node(self) -> int:
        await self._check_versions()
        if self._coordinator is not None:
            return self._coordinator
        conn = await self.client.any_connection()
        for _ in range(_RETRIES):
            resp = await conn.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_V,
                                      {"key": self.group, "key_type": GROUP_KEY})
            if resp.error_code in _COORDINATOR_MOVED:
                await asyncio.sleep(_BACKOFF_S)
                continue
            if resp.error_code:
                raise KafkaError(resp.error_code, f"FindCoordinator for group {self.group!r}")
            self.client.metadata_cache.brokers[resp.node_id] = (resp.host, resp.port)
            self._coordinator = resp.node_id
            return resp.node_id
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"FindCoordinator for group {self.group!r}")

    async def _request(self, key: int, version: int, body: dict[str, Any]) -> Any:
        """A request to the coordinator, following it when it moves."""
        for _ in range(_RETRIES):
            try:
                node = await self._coordinator_node()
                resp = await (await self.client.connection(node)).request(key, version, body)
            except (ConnectionError, TimeoutError, OSError):
                self._coordinator = None
                await asyncio.sleep(_BACKOFF_S)
                continue
            codes = {getattr(resp, "error_code", 0)} | {
                p.error_code for t in resp.topics for p in t.partitions}
            if codes & _COORDINATOR_MOVED:
                self._coordinator = None
                await asyncio.sleep(_BACKOFF_S)
                continue
            return resp
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{ApiKey(key).name} for group {self.group!r}")

    async def fetch(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """{partition: committed offset} for the partitions the group has committed (read stable:
        a commit inside an open transaction is waited for)."""
        body = {"group_id": self.group, "require_stable": True,
                "topics": [{"name": topic, "partition_indexes": list(partitions)}]}
        for _ in range(_RETRIES):
            resp = await self._request(ApiKey.OFFSET_FETCH, OFFSET_FETCH_V, body)
            if resp.error_code:
                raise KafkaError(resp.error_code, f"OffsetFetch for group {self.group!r}")
            out: dict[int, int] = {}
            unstable = False
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                        unstable = True
                    elif p.error_code:
                        raise KafkaError(p.error_code, f"OffsetFetch {topic}-{p.partition_index} "
                                                       f"for group {self.group!r}")
                    elif p.committed_offset >= 0:
                        out[p.partition_index] = p.committed_offset
            if not unstable:
                return out
            await asyncio.sleep(_BACKOFF_S)
        raise KafkaError(ErrorCode.UNSTABLE_OFFSET_COMMIT, f"OffsetFetch for group {self.group!r}")

    async def commit(self, topic: str, offsets: dict[int, int]) -> None:
        """Commit {partition: next offset to read} as a consumer outside the group's membership."""
        if not offsets:
            return
        body = {
            "group_id": self.group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p, o in sorted(offsets.items())]}],
        }
        resp = await self._request(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_V, body)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                    ErrorCode.REBALANCE_IN_PROGRESS):
                    raise GroupHasMembersError(
                        f"group {self.group!r} has consumers that joined it, so its offsets cannot be "
                        f"committed from outside ({ErrorCode(p.error_code).name}); follow with a group "
                        "no consumer subscribes with")
                if p.error_code:
                    raise KafkaError(p.error_code, f"OffsetCommit {topic}-{p.partition_index} "
                                                   f"for group {self.group!r}")
