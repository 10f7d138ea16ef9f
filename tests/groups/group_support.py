"""Helpers driving a GroupCoordinator the way a broker shell would, with explicit time."""

from __future__ import annotations

import itertools
import random
import struct
from dataclasses import dataclass, field

from pylog.groups import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupResult,
    JoinRequest,
    Output,
    SyncGroupResult,
    SyncRequest,
)
from pylog.groups.records import decode_key

GROUP = "g"
_handles = itertools.count(1)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (version, topics, null user data)."""
    parts = [struct.pack(">hi", 0, len(topics))]
    for t in topics:
        b = t.encode()
        parts.append(struct.pack(">h", len(b)) + b)
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)


def coordinator(**config: int) -> GroupCoordinator:
    """A coordinator that loaded every `__consumer_offsets` partition (empty), as a broker leading
    them all would."""
    return load_all(GroupCoordinator(GroupConfig(**config), rng=random.Random(1234)), [], now_ms=0)


def load_all(c: GroupCoordinator, records: list, *, now_ms: int) -> GroupCoordinator:
    """Load every partition of `c` from `records` ((key, value) entries of any partitions), each
    partition through `load_partition` with its own records, as the broker shell does."""
    by_partition: dict[int, list] = {p: [] for p in range(c.config.offsets_topic_num_partitions)}
    for entry in records:
        key = entry[0] if isinstance(entry, tuple) else entry.key
        by_partition[c.partition_for(_group_of(bytes(key)))].append(entry)
    for p, entries in by_partition.items():
        c.load_partition(p, entries, now_ms=now_ms)
    return c


def _group_of(key: bytes) -> str:
    k = decode_key(key)
    if k is not None:
        return k.group_id
    from pylog.groups.group_records import decode_key as decode_group_key

    rk = decode_group_key(key)
    assert rk is not None, key
    return rk.group_id


@dataclass
class Shell:
    """Collects completions and records like the asyncio shell would."""

    c: GroupCoordinator
    now: int = 0
    results: dict[int, JoinGroupResult | SyncGroupResult] = field(default_factory=dict)
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)

    def absorb(self, out: Output) -> Output:
        for r in out.records:
            key = decode_key(r.key)
            assert key is not None and r.partition == self.c.partition_for(key.group_id)
            self.records.append((r.key, r.value))
        for h, res in out.completions:
            assert h not in self.results, f"handle {h} completed twice"
            self.results[h] = res
        return out

    def advance(self, ms: int) -> Output:
        self.now += ms
        return self.absorb(self.c.tick(self.now))

    def join(
        self,
        member_id: str = "",
        *,
        group: str = GROUP,
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
        version: int = 5,
        session: int = 10_000,
        rebalance: int = 30_000,
        client_id: str = "client",
        protocol_type: str = "consumer",
    ) -> int:
        h = next(_handles)
        self.absorb(
            self.c.join_group(
                JoinRequest(
                    group,
                    member_id,
                    instance,
                    client_id,
                    "/127.0.0.1",
                    session,
                    rebalance,
                    protocol_type,
                    protocols,
                    version,
                ),
                now_ms=self.now,
                handle=h,
            )
        )
        return h

    def join_new(self, **kw) -> tuple[str, int]:
        """The v4+ two-step join of a dynamic member: returns (member id, parked handle)."""
        h = self.join("", **kw)
        res = self.results.pop(h)
        assert res.error == 79, res
        return res.member_id, self.join(res.member_id, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = GROUP,
        instance: str | None = None,
    ) -> int:
        h = next(_handles)
        self.absorb(
            self.c.sync_group(
                SyncRequest(group, generation, member_id, instance, "consumer", None, assignments or {}),
                now_ms=self.now,
                handle=h,
            )
        )
        return h

    def heartbeat(self, member_id: str, generation: int, *, group: str = GROUP, instance: str | None = None):
        return self.absorb(self.c.heartbeat(group, generation, member_id, instance, now_ms=self.now)).response

    def leave(self, *members: tuple[str, str | None], group: str = GROUP):
        return self.absorb(self.c.leave_group(group, members, now_ms=self.now)).response

    def result(self, handle: int) -> JoinGroupResult | SyncGroupResult | None:
        return self.results.get(handle)

    def stabilize(self, handles: list[int]) -> tuple[int, str, list[str]]:
        """Complete a rebalance whose joins are parked: returns (generation, leader, member ids)."""
        for _ in range(100):
            if all(h in self.results for h in handles):
                break
            self.advance(100)
        joins = [self.results[h] for h in handles]
        assert all(j.error == 0 for j in joins), joins
        gen = joins[0].generation_id
        leader = joins[0].leader
        ids = [j.member_id for j in joins]
        assignments = {mid: f"{mid}@{gen}".encode() for mid in ids}
        syncs = [self.sync(mid, gen, assignments if mid == leader else None) for mid in ids]
        for h in syncs:
            assert self.results[h].error == 0, self.results[h]
        return gen, leader, ids
