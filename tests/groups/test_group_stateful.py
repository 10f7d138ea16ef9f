"""Random operation sequences against the coordinator, checking its invariants after every step.

Simulated clients behave like real consumers (one outstanding request each, follow the errors
they get back); time moves by random steps or straight to the next deadline.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from group_support import GROUP, load_all, subscription
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from pylog.protocol.errors import ErrorCode as E

from pylog.groups import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinGroupResult,
    JoinRequest,
    OffsetCommitPartition,
    Output,
    SyncGroupResult,
    SyncRequest,
)

SESSION = 6000
REBALANCE = 10_000
METADATA = [
    (("range", subscription("t")), ("rr", subscription("t"))),
    (("rr", subscription("t", "u")),),
]


@dataclass
class Client:
    index: int
    instance: str | None
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: tuple = ()
    variant: int = 0
    outstanding: int | None = None  # handle of the parked JoinGroup / SyncGroup
    assignment: bytes = b""
    needs_rejoin: bool = True
    synced_generation: int = -1


@dataclass
class World:
    c: GroupCoordinator
    clients: list[Client]
    now: int = 0
    next_handle: int = 0
    owner: dict[int, Client] = field(default_factory=dict)
    completed: set[int] = field(default_factory=set)
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    protocol_of_generation: dict[tuple[object, int], str] = field(default_factory=dict)
    max_generation: int = 0
    last_group: object = None


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        clients = [Client(i, f"static-{i}" if i < 2 else None) for i in range(4)]
        coordinator = load_all(GroupCoordinator(GroupConfig(), rng=random.Random(0)), [], now_ms=0)
        self.w = World(coordinator, clients)

    # ------------------------------------------------------------------ plumbing

    def absorb(self, out: Output) -> Output:
        w = self.w
        w.records.extend((r.key, r.value) for r in out.records)
        for h, res in out.completions:
            assert h not in w.completed, "handle completed twice"
            w.completed.add(h)
            client = w.owner.pop(h)
            assert client.outstanding == h
            client.outstanding = None
            if isinstance(res, JoinGroupResult):
                self.on_join(client, res)
            else:
                self.on_sync(client, res)
        return out

    def on_join(self, client: Client, res: JoinGroupResult) -> None:
        if res.error == E.NONE:
            client.member_id, client.generation = res.member_id, res.generation_id
            client.leader, client.members = bool(res.members), res.members
            client.needs_rejoin = False
            key = (self.w.c.group(GROUP), res.generation_id)  # a group may expire and come back
            seen = self.w.protocol_of_generation.setdefault(key, res.protocol_name)
            assert seen == res.protocol_name, "one protocol per generation"
        elif res.error == E.MEMBER_ID_REQUIRED:
            client.member_id = res.member_id
        elif res.error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.member_id, client.generation = "", -1
        # REBALANCE_IN_PROGRESS / others: keep the id and rejoin.

    def on_sync(self, client: Client, res: SyncGroupResult) -> None:
        if res.error == E.NONE:
            client.assignment = res.assignment
            client.synced_generation = client.generation
            return
        client.needs_rejoin = True
        if res.error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.member_id, client.generation = "", -1

    def handle_for(self, client: Client) -> int:
        self.w.next_handle += 1
        h = self.w.next_handle
        client.outstanding = h
        self.w.owner[h] = client
        return h

    def idle(self, i: int) -> Client | None:
        client = self.w.clients[i]
        return client if client.outstanding is None else None

    # ------------------------------------------------------------------ client actions

    @rule(i=st.integers(0, 3), version=st.sampled_from([3, 5]), variant=st.integers(0, 1))
    def join(self, i: int, version: int, variant: int) -> None:
        client = self.idle(i)
        if client is None:
            return
        client.variant = variant
        w = self.w
        h = self.handle_for(client)
        self.absorb(
            w.c.join_group(
                JoinRequest(
                    GROUP,
                    client.member_id,
                    client.instance,
                    f"c{i}",
                    "/h",
                    SESSION,
                    REBALANCE,
                    "consumer",
                    METADATA[variant],
                    version,
                ),
                now_ms=w.now,
                handle=h,
            )
        )

    @rule(i=st.integers(0, 3))
    def sync(self, i: int) -> None:
        client = self.idle(i)
        if client is None or client.generation < 0:
            return
        assignments = {m.member_id: m.member_id.encode() for m in client.members} if client.leader else {}
        h = self.handle_for(client)
        self.absorb(
            self.w.c.sync_group(
                SyncRequest(
                    GROUP,
                    client.generation,
                    client.member_id,
                    client.instance,
                    "consumer",
                    None,
                    assignments,
                ),
                now_ms=self.w.now,
                handle=h,
            )
        )

    @rule(i=st.integers(0, 3))
    def heartbeat(self, i: int) -> None:
        client = self.idle(i)
        if client is None or not client.member_id:
            return
        out = self.absorb(
            self.w.c.heartbeat(GROUP, client.generation, client.member_id, client.instance, now_ms=self.w.now)
        )
        if out.response != E.NONE:
            client.needs_rejoin = True
        if out.response in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.member_id, client.generation = "", -1

    @rule(i=st.integers(0, 3))
    def leave(self, i: int) -> None:
        client = self.idle(i)
        if client is None or not client.member_id:
            return
        self.absorb(self.w.c.leave_group(GROUP, [(client.member_id, client.instance)], now_ms=self.w.now))
        client.member_id, client.generation, client.needs_rejoin = "", -1, True

    @rule(i=st.integers(0, 3))
    def crash(self, i: int) -> None:
        """The process restarts: it forgets its member id (a static member keeps its instance id)."""
        client = self.w.clients[i]
        if client.outstanding is not None:
            return
        client.member_id, client.generation, client.needs_rejoin = "", -1, True

    def natural_step(self, i: int) -> None:
        """What a well-behaved consumer does next."""
        client = self.idle(i)
        if client is None:
            return
        if client.needs_rejoin or not client.member_id or client.generation < 0:
            self.join(i, 5, client.variant)
        elif client.synced_generation != client.generation:
            self.sync(i)
        else:
            self.heartbeat(i)

    @rule(i=st.integers(0, 3))
    def client_step(self, i: int) -> None:
        self.natural_step(i)

    @rule(ms=st.sampled_from([0, 100, 1000]))
    def all_clients_step(self, ms: int) -> None:
        for i in range(4):
            self.natural_step(i)
        self.advance(ms)

    @rule(rounds=st.integers(1, 8))
    def settle(self, rounds: int) -> None:
        """Let every client follow the protocol for a while (drives groups to Stable)."""
        for _ in range(rounds):
            self.all_clients_step(100)

    @rule(i=st.integers(0, 3), offset=st.integers(0, 100))
    def commit(self, i: int, offset: int) -> None:
        client = self.w.clients[i]
        out = self.absorb(
            self.w.c.commit_offsets(
                GROUP,
                client.generation,
                client.member_id,
                client.instance,
                [OffsetCommitPartition("t", 0, offset)],
                api_version=8,
                now_ms=self.w.now,
            )
        )
        assert len(out.response) == 1

    @rule(ms=st.sampled_from([0, 50, 100, 1000, 3000, 7000, 12_000]))
    def advance(self, ms: int) -> None:
        self.w.now += ms
        self.absorb(self.w.c.tick(self.w.now))

    @rule()
    def to_next_deadline(self) -> None:
        d = self.w.c.next_deadline_ms()
        if d is not None:
            self.w.now = max(self.w.now, d)
            self.absorb(self.w.c.tick(self.w.now))

    @rule()
    def everyone_goes_silent(self) -> None:
        """With no client activity every parked request is answered and the group empties."""
        w = self.w
        target = w.now + 10 * REBALANCE + 400_000
        while (d := w.c.next_deadline_ms()) is not None and d <= target:
            w.now = max(w.now, d)
            self.absorb(w.c.tick(w.now))
        assert not w.owner, "parked requests left unanswered"
        g = w.c.group(GROUP)
        assert g is None or (g.is_(GroupState.EMPTY) and not g.members)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def group_is_consistent(self) -> None:
        g = self.w.c.group(GROUP)
        if g is None:
            return
        if g is not self.w.last_group:  # deleted (expired) and created again
            self.w.last_group, self.w.max_generation = g, 0
        assert g.generation_id >= self.w.max_generation
        self.w.max_generation = g.generation_id
        members = g.members.values()
        if g.is_(GroupState.EMPTY):
            assert not g.members
        if g.members:
            assert g.leader_id in g.members
        for m in members:
            assert not (m.awaiting_join and m.awaiting_sync), "member in two states"
            if m.awaiting_join:
                assert g.is_(GroupState.PREPARING_REBALANCE)
            if m.awaiting_sync:
                assert g.is_(GroupState.COMPLETING_REBALANCE)
            if m.group_instance_id is not None:
                assert g.static_members[m.group_instance_id] == m.member_id
        assert len(g.static_members) == sum(m.group_instance_id is not None for m in members)
        assert not set(g.pending_members) & set(g.members)
        assert g.pending_sync <= set(g.members)
        if g.pending_sync:
            assert g.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
        if g.is_(GroupState.STABLE):
            assert all(m.assignment for m in members), "a Stable member without assignment"
        counts = Counter(name for m in members for name, _ in m.protocols)
        assert +counts == +g.supported_protocols
        # Every parked request belongs to a member of the group.
        parked = {h for m in members for h in (m.join_handle, m.sync_handle) if h is not None}
        assert parked <= set(self.w.owner)

    @invariant()
    def records_replay_to_the_durable_state(self) -> None:
        w = self.w
        c2 = load_all(GroupCoordinator(w.c.config, rng=random.Random(1)), w.records, now_ms=w.now)
        g, g2 = w.c.group(GROUP), c2.group(GROUP)
        if g is None:
            assert g2 is None
            return
        if g2 is None:
            assert not w.c.offsets_of(GROUP)
            return
        assert c2.offsets_of(GROUP) == w.c.offsets_of(GROUP)
        assert g2.generation_id <= g.generation_id
        if g.is_(GroupState.STABLE):
            assert (g2.generation_id, g2.protocol_name) == (g.generation_id, g.protocol_name)
            assert {k: m.assignment for k, m in g2.members.items()} == {
                k: m.assignment for k, m in g.members.items()
            }
        if g.is_(GroupState.EMPTY):
            assert g2.generation_id == g.generation_id and not g2.members


GroupMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGroupMachine = GroupMachine.TestCase
