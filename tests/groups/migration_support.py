"""Well-behaved clients of both consumer protocols, driving a GroupCoordinator with explicit time.

`ClassicClient` is an eager classic consumer (range assignment by its leader, gives up everything
on REBALANCE_IN_PROGRESS, a v0 subscription); `ConsumerClient` speaks KIP-848 (takes the
assignment it is given at once, reports it in the next heartbeat). Each `step` is one poll: the
client sends what its state calls for and reads what came back. `owned` is what the client
consumes from: the property the tests check is that no partition is owned by two clients.
"""

from __future__ import annotations

import itertools
import struct
import uuid
from dataclasses import dataclass, field

from group_support import subscription
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import GroupCoordinator, JoinRequest, Output, SyncRequest
from pylog.groups.consumer import Heartbeat
from pylog.groups.consumer_protocol import decode_assignment, encode_assignment
from pylog.groups.records import decode_key

GROUP = "mixed"
TOPIC = "t"
PARTITIONS = 6
TOPICS = {TOPIC: (uuid.UUID(int=42), PARTITIONS)}
TID = TOPICS[TOPIC][0]
_handles = itertools.count(1)


@dataclass
class World:
    c: GroupCoordinator
    now: int = 0
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    results: dict[int, object] = field(default_factory=dict)

    def absorb(self, out: Output) -> Output:
        for r in out.records:
            self.records.append((r.key, r.value))
        for h, res in out.completions:
            assert h not in self.results, f"handle {h} completed twice"
            self.results[h] = res
        return out

    def tick(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.c.tick(self.now, TOPICS))


@dataclass
class ClassicClient:
    name: str
    member_id: str = ""
    generation: int = -1
    owned: frozenset[int] = frozenset()
    join: int | None = None
    sync: int | None = None
    joined: bool = False  # has a generation and an assignment

    def step(self, w: World) -> None:
        if self.join is not None:
            res = w.results.pop(self.join, None)
            if res is None:
                return
            self.join = None
            if res.error == E.MEMBER_ID_REQUIRED:
                self.member_id = res.member_id
                return self._join(w)
            if res.error != E.NONE:
                self.member_id, self.generation = (
                    ("" if res.error == E.UNKNOWN_MEMBER_ID else self.member_id),
                    -1,
                )
                return self._join(w)
            self.member_id, self.generation = res.member_id, res.generation_id
            assignments = _range([m.member_id for m in res.members]) if res.members else {}
            self.sync = next(_handles)
            w.absorb(
                w.c.sync_group(
                    SyncRequest(
                        GROUP,
                        self.generation,
                        self.member_id,
                        None,
                        "consumer",
                        res.protocol_name,
                        assignments,
                    ),
                    now_ms=w.now,
                    handle=self.sync,
                    topics=TOPICS,
                )
            )
            return
        if self.sync is not None:
            res = w.results.pop(self.sync, None)
            if res is None:
                return
            self.sync = None
            if res.error != E.NONE:
                return self._rejoin(w, res.error)
            self.owned = decode_assignment(res.assignment).get(TOPIC, frozenset())
            self.joined = True
            return
        if not self.joined:
            return self._join(w)
        error = w.absorb(
            w.c.heartbeat(GROUP, self.generation, self.member_id, None, now_ms=w.now, topics=TOPICS)
        ).response
        if error != E.NONE:
            self._rejoin(w, error)

    def _rejoin(self, w: World, error: int) -> None:
        self.owned = frozenset()  # eager: everything is given up before rejoining
        self.joined = False
        if error in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
            self.member_id, self.generation = ("" if error == E.UNKNOWN_MEMBER_ID else self.member_id), -1
        self._join(w)

    def _join(self, w: World) -> None:
        self.owned = frozenset()
        self.join = next(_handles)
        w.absorb(
            w.c.join_group(
                JoinRequest(
                    GROUP,
                    self.member_id,
                    None,
                    self.name,
                    "/127.0.0.1",
                    10_000,
                    20_000,
                    "consumer",
                    [("range", subscription(TOPIC))],
                    5,
                ),
                now_ms=w.now,
                handle=self.join,
                topics=TOPICS,
            )
        )

    def leave(self, w: World) -> None:
        if self.member_id:
            w.absorb(w.c.leave_group(GROUP, [(self.member_id, None)], now_ms=w.now))
        self.owned = frozenset()


@dataclass
class ConsumerClient:
    name: str
    member_id: str = ""
    epoch: int = 0
    owned: frozenset[int] = frozenset()

    def step(self, w: World) -> None:
        hb = Heartbeat(
            GROUP,
            self.member_id,
            self.epoch,
            rebalance_timeout_ms=20_000,
            subscribed_topic_names=[TOPIC] if self.epoch == 0 else None,
            owned={TID: self.owned} if self.owned else {},
            client_id=self.name,
        )
        r = w.absorb(w.c.consumer_group_heartbeat(hb, TOPICS, now_ms=w.now)).response
        if r["error_code"] in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.owned, self.epoch = frozenset(), 0
            return
        assert r["error_code"] == E.NONE, r
        self.member_id, self.epoch = r["member_id"], r["member_epoch"]
        if r["assignment"] is not None:
            self.owned = frozenset(p for tp in r["assignment"]["topic_partitions"] for p in tp["partitions"])

    def leave(self, w: World) -> None:
        if self.member_id:
            w.absorb(w.c.consumer_group_heartbeat(Heartbeat(GROUP, self.member_id, -1), TOPICS, now_ms=w.now))
        self.owned = frozenset()


def _range(member_ids: list[str]) -> dict[str, bytes]:
    ids = sorted(member_ids)
    out = {}
    base, extra = divmod(PARTITIONS, len(ids))
    start = 0
    for i, mid in enumerate(ids):
        n = base + (1 if i < extra else 0)
        out[mid] = encode_assignment({TOPIC: frozenset(range(start, start + n))})
        start += n
    return out


def assert_disjoint(clients: list) -> None:
    seen: dict[int, str] = {}
    for cl in clients:
        for p in cl.owned:
            assert p not in seen, f"partition {p} owned by {seen[p]} and {cl.name}"
            seen[p] = cl.name


def group_of_key(key: bytes) -> str:
    k = decode_key(key)
    if k is not None:
        return k.group_id
    from pylog.groups.group_records import decode_key as decode_group_key

    rk = decode_group_key(key)
    assert rk is not None
    return rk.group_id


def subscription_v1(topic: str, owned: list[int]) -> bytes:
    """A ConsumerProtocolSubscription v1 (topics, null user data, owned partitions)."""
    b = topic.encode()
    parts = [struct.pack(">hi", 1, 1), struct.pack(">h", len(b)) + b, struct.pack(">i", -1)]
    parts.append(struct.pack(">i", 1) + struct.pack(">h", len(b)) + b + struct.pack(">i", len(owned)))
    parts.extend(struct.pack(">i", p) for p in owned)
    return b"".join(parts)
