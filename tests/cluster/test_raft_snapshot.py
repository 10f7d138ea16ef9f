"""Unit tests of the Raft core's snapshots: compact, send, restore, stale snapshots, restart."""

from __future__ import annotations

import random

import pytest

from pylog.cluster.progress import ProgressState
from pylog.cluster.raft import (
    Entry,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    RaftNode,
    Ready,
    Role,
    Snapshot,
)

MT = MessageType


class Node:
    """A RaftNode with its storage and a toy state machine: the applied (index, data) pairs."""

    def __init__(self, node_id: int, voters: list[int], storage: MemoryStorage, **kw: int) -> None:
        self.storage = storage
        snap = storage.snapshot()
        self.applied: list[tuple[int, bytes]] = _decode(snap.data) if snap is not None else []
        self.raft = RaftNode(node_id, voters, storage, random.Random(node_id), **kw)
        self.readies: list[Ready] = []

    def drain(self) -> list[Message]:
        out: list[Message] = []
        while self.raft.has_ready():
            rd = self.raft.ready()
            self.readies.append(rd)
            self.storage.save(rd)
            out.extend(rd.messages)
            if rd.snapshot is not None:
                self.applied = _decode(rd.snapshot.data)
            self.applied.extend((e.index, e.data) for e in rd.committed_entries if e.data)
            self.raft.advance(rd)
        return out

    def step(self, m: Message) -> list[Message]:
        self.raft.step(m)
        return self.drain()

    @property
    def state(self) -> list[bytes]:
        return [d for _, d in self.applied]

    def compact(self, index: int) -> Snapshot:
        """Capture the state machine as of ``index`` and hand it to the node."""
        return self.raft.compact(index, _encode([(i, d) for i, d in self.applied if i <= index]))


def _encode(pairs: list[tuple[int, bytes]]) -> bytes:
    return b"\n".join(b"%d:%s" % (i, d) for i, d in pairs)


def _decode(data: bytes) -> list[tuple[int, bytes]]:
    pairs = [line.split(b":", 1) for line in data.split(b"\n")] if data else []
    return [(int(i), d) for i, d in pairs]


def log(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, f"e{i}".encode()) for i in range(lo, hi + 1)]


def make_leader(n_entries: int = 10, voters: tuple[int, ...] = (1, 2, 3)) -> Node:
    """Node 1 holding entries 1..n (term 1, all committed), elected leader of term 2."""
    lead = Node(1, list(voters), MemoryStorage(log(1, n_entries), HardState(1, None, n_entries)))
    lead.drain()
    lead.raft.campaign()
    lead.drain()
    lead.step(Message(MT.PRE_VOTE_RESP, 2, 1, 2))
    lead.step(Message(MT.VOTE_RESP, 2, 1, 2))
    assert lead.raft.role is Role.LEADER and lead.raft.term == 2
    assert lead.raft.applied == n_entries
    return lead


def deliver(nodes: dict[int, Node], queue: list[Message], *, drop=lambda m: False, rounds: int = 100) -> None:  # type: ignore[no-untyped-def]
    for _ in range(rounds):
        if not queue:
            return
        m = queue.pop(0)
        if m.dst in nodes and not drop(m):
            queue.extend(nodes[m.dst].step(m))
    raise AssertionError("messages kept flowing")


def test_compact_refuses_an_index_beyond_applied_or_not_newer() -> None:
    lead = make_leader()
    with pytest.raises(ValueError, match="only 10 is applied"):
        lead.raft.compact(11, b"x")
    snap = lead.compact(10)
    assert snap == Snapshot(10, 1, _encode([(i, b"e%d" % i) for i in range(1, 11)]))
    with pytest.raises(ValueError, match="not newer"):
        lead.raft.compact(10, b"x")
    with pytest.raises(ValueError, match="not newer"):
        lead.raft.compact(4, b"x")


def log_data(lo: int, hi: int) -> list[bytes]:
    return [e.data for e in log(lo, hi)]


def test_compact_drops_the_prefix_and_the_next_ready_carries_it() -> None:
    lead = make_leader()
    snap = lead.raft.compact(7, b"state@7")
    assert lead.raft.log.start_index == 7 and lead.raft.log.term(7) == 1 and lead.raft.log.term(6) is None
    assert lead.raft.snapshot is snap
    assert lead.raft.has_ready()
    lead.drain()
    assert lead.readies[-1].snapshot_taken is snap and lead.readies[-1].snapshot is None
    assert lead.storage.snapshot() is snap
    assert [e.index for e in lead.storage.entries()] == [8, 9, 10, 11]  # 11: the leader's no-op
    assert not lead.raft.has_ready()


def test_leader_sends_its_snapshot_to_a_follower_behind_its_log_start() -> None:
    lead = make_leader()
    lead.compact(8)
    lead.drain()
    follower = Node(2, [1, 2, 3], MemoryStorage())
    nodes = {1: lead, 2: follower}
    # A heartbeat's answer prompts an APPEND after 10, which is rejected; probing back
    # to index 0 needs entries the leader no longer has.
    lead.raft.tick()
    queue = [m for m in lead.drain() if m.dst == 2]
    sent: list[Message] = []

    def watch(m: Message) -> bool:
        sent.append(m)
        return False

    deliver(nodes, queue, drop=watch)
    snaps = [m for m in sent if m.type is MT.SNAPSHOT]
    assert len(snaps) == 1 and snaps[0].snapshot == lead.raft.snapshot
    assert (snaps[0].index, snaps[0].log_term) == (8, 1)
    restored = [rd for rd in follower.readies if rd.snapshot is not None]
    assert len(restored) == 1 and restored[0].snapshot.index == 8
    assert restored[0].hard_state is not None and restored[0].hard_state.commit == 8
    assert follower.storage.snapshot() == lead.raft.snapshot
    # The follower's state machine is the snapshot's plus what followed, in order.
    assert follower.state == lead.state == log_data(1, 10)
    assert follower.raft.applied == follower.raft.committed == lead.raft.committed == 11
    pr = lead.raft.progress(2)
    assert pr is not None and pr.state is ProgressState.REPLICATE and pr.match == 11
    assert follower.raft.log.slice(9, 12) == lead.raft.log.slice(9, 12)


def test_a_lost_snapshot_is_sent_again_after_an_election_timeout() -> None:
    lead = make_leader()
    lead.compact(10)
    lead.drain()
    follower = Node(2, [1, 2, 3], MemoryStorage())
    nodes = {1: lead, 2: follower}
    lead.raft.tick()
    queue = [m for m in lead.drain() if m.dst == 2]
    lost: list[Message] = []

    def drop_snapshots(m: Message) -> bool:
        if m.type is MT.SNAPSHOT:
            lost.append(m)
            return True
        return False

    deliver(nodes, queue, drop=drop_snapshots)
    assert len(lost) == 1
    pr = lead.raft.progress(2)
    assert pr is not None and pr.state is ProgressState.SNAPSHOT and pr.is_paused()
    # Heartbeats keep the follower active, but no snapshot is sent again before the timeout.
    resent_at: list[int] = []
    for t in range(1, 3 * lead.raft.election_timeout):
        lead.raft.tick()

        def record(m: Message, t: int = t) -> bool:
            if m.type is MT.SNAPSHOT:
                resent_at.append(t)
            return False

        deliver(nodes, [m for m in lead.drain() if m.dst == 2], drop=record)
        if follower.raft.applied == 11:
            break
    assert len(resent_at) == 1 and resent_at[0] >= lead.raft.election_timeout
    assert follower.state == lead.state and follower.raft.applied == lead.raft.committed == 11


def test_stale_snapshot_is_answered_with_the_commit_index() -> None:
    follower = Node(2, [1, 2, 3], MemoryStorage(log(1, 6), HardState(1, None, 6)))
    follower.drain()
    old = Snapshot(4, 1, b"old")
    out = follower.step(Message(MT.SNAPSHOT, 1, 2, 1, log_term=1, index=4, commit=6, snapshot=old))
    assert out == [Message(MT.APPEND_RESP, 2, 1, 1, index=6)]
    assert follower.storage.snapshot() is None and all(rd.snapshot is None for rd in follower.readies)
    assert follower.raft.log.start_index == 0


def test_snapshot_whose_last_entry_the_follower_holds_only_moves_the_commit_index() -> None:
    follower = Node(2, [1, 2, 3], MemoryStorage(log(1, 9), HardState(1, None, 3)))
    follower.drain()
    assert follower.state == log_data(1, 3)
    snap = Snapshot(7, 1, _encode([(i, b"e%d" % i) for i in range(1, 8)]))
    out = follower.step(Message(MT.SNAPSHOT, 1, 2, 1, log_term=1, index=7, commit=7, snapshot=snap))
    assert out == [Message(MT.APPEND_RESP, 2, 1, 1, index=7)]
    assert all(rd.snapshot is None for rd in follower.readies)
    assert follower.raft.log.last_index() == 9 and follower.raft.committed == 7
    assert follower.state == log_data(1, 7)  # applied from its own log


def test_follower_restoring_discards_a_divergent_log() -> None:
    # Entries 4..9 of term 1 were never committed; the leader's snapshot says index 8 is of term 3.
    follower = Node(2, [1, 2, 3], MemoryStorage(log(1, 9), HardState(1, None, 3)))
    follower.drain()
    snap = Snapshot(8, 3, b"2:a\n5:b\n8:c")
    out = follower.step(Message(MT.SNAPSHOT, 1, 2, 3, log_term=3, index=8, commit=8, snapshot=snap))
    assert out == [Message(MT.APPEND_RESP, 2, 1, 3, index=8)]
    assert follower.raft.role is Role.FOLLOWER and follower.raft.leader_id == 1 and follower.raft.term == 3
    rd = next(rd for rd in follower.readies if rd.snapshot is not None)
    assert rd.snapshot is snap and rd.committed_entries == () and rd.entries == ()
    assert follower.state == [b"a", b"b", b"c"]
    assert follower.storage.snapshot() is snap and follower.storage.entries() == []
    assert follower.raft.last_index == 8 and follower.raft.applied == 8
    # Appends continue right after the snapshot.
    append = Message(MT.APPEND, 1, 2, 3, log_term=3, index=8, entries=(Entry(3, 9, b"d"),), commit=9)
    out = follower.step(append)
    assert out == [Message(MT.APPEND_RESP, 2, 1, 3, index=9)]
    assert follower.state == [b"a", b"b", b"c", b"d"]


def test_candidate_receiving_a_snapshot_becomes_a_follower() -> None:
    node = Node(2, [1, 2, 3], MemoryStorage())
    node.raft.campaign()
    node.drain()
    node.step(Message(MT.PRE_VOTE_RESP, 3, 2, 1))
    assert node.raft.role is Role.CANDIDATE and node.raft.term == 1
    snap = Snapshot(5, 1, b"5:x")
    out = node.step(Message(MT.SNAPSHOT, 1, 2, 1, log_term=1, index=5, commit=5, snapshot=snap))
    assert node.raft.role is Role.FOLLOWER and node.raft.leader_id == 1
    assert out == [Message(MT.APPEND_RESP, 2, 1, 1, index=5)]


def test_snapshot_from_a_stale_leader_teaches_it_the_term() -> None:
    node = Node(2, [1, 2, 3], MemoryStorage(hard_state=HardState(4, None, 0)))
    snap = Snapshot(5, 3, b"")
    out = node.step(Message(MT.SNAPSHOT, 1, 2, 3, log_term=3, index=5, commit=5, snapshot=snap))
    assert out == [Message(MT.APPEND_RESP, 2, 1, 4)]
    assert node.raft.snapshot is None and node.raft.term == 4


def test_no_snapshot_for_a_follower_that_does_not_answer() -> None:
    lead = make_leader()
    lead.compact(10)
    lead.drain()
    lead.step(Message(MT.APPEND_RESP, 2, 1, 2, index=10, reject=True, reject_hint=0))
    pr = lead.raft.progress(2)
    assert pr is not None and pr.state is ProgressState.SNAPSHOT  # it answered: recently active
    pr3 = lead.raft.progress(3)
    assert pr3 is not None and not pr3.recent_active
    # Node 3 never answered: a probe that would need the snapshot sends nothing to it.
    pr3.next = 1
    assert not lead.raft._send_append(3)
    assert pr3.state is ProgressState.PROBE


def test_leader_compacting_further_while_a_snapshot_is_in_flight_sends_the_newer_one() -> None:
    lead = make_leader(voters=(1, 2))
    lead.compact(5)
    lead.drain()
    out = lead.step(Message(MT.APPEND_RESP, 2, 1, 2, index=10, reject=True, reject_hint=0))
    assert [(m.type, m.index) for m in out if m.dst == 2] == [(MT.SNAPSHOT, 5)]
    lead.compact(10)
    lead.drain()
    out = lead.step(Message(MT.APPEND_RESP, 2, 1, 2, index=5))  # the first one arrived
    assert [(m.type, m.index) for m in out if m.dst == 2] == [(MT.SNAPSHOT, 10)]
    out = lead.step(Message(MT.APPEND_RESP, 2, 1, 2, index=10))
    assert [(m.type, m.index, len(m.entries)) for m in out if m.dst == 2] == [(MT.APPEND, 10, 1)]
    pr = lead.raft.progress(2)
    assert pr is not None and pr.state is ProgressState.REPLICATE


def test_restart_from_a_snapshot_and_a_tail() -> None:
    snap = Snapshot(6, 2, _encode([(i, b"e%d" % i) for i in range(1, 7)]))
    tail = [Entry(2, 7, b"e7"), Entry(3, 8, b"e8"), Entry(3, 9, b"e9")]
    storage = MemoryStorage(tail, HardState(3, 1, 8), snapshot=snap)
    node = Node(1, [1, 2, 3], storage)
    assert node.raft.applied == 6 and node.raft.committed == 8 and node.raft.log.start_index == 6
    assert node.raft.snapshot == snap and node.raft.last_index == 9
    node.drain()
    assert node.state == log_data(1, 8)
    assert [e.index for e in node.readies[0].committed_entries] == [7, 8]
    with pytest.raises(ValueError, match="behind the snapshot"):
        RaftNode(1, [1, 2, 3], storage, random.Random(0), applied=5)


def test_restarted_single_node_compacts_and_restarts_again() -> None:
    storage = MemoryStorage()
    node = Node(1, [1], storage)
    node.raft.campaign()
    for i in range(5):
        node.raft.propose(f"r{i}".encode())
    node.drain()
    node.compact(node.raft.applied)
    node.drain()
    node.raft.propose(b"after")
    node.drain()
    again = Node(1, [1], storage)
    again.drain()
    assert again.state == [b"r0", b"r1", b"r2", b"r3", b"r4", b"after"]
    assert again.raft.committed == 7 and again.raft.log.start_index == 6
