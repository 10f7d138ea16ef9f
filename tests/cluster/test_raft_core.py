"""Unit tests of the Raft core: single node, elections, commit rule, back-off, pre-vote, check-quorum."""

from __future__ import annotations

import random

import pytest
from raft_sim import SimCluster

from pylog.cluster.raft import (
    Entry,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    NotLeader,
    RaftNode,
    Role,
)


def drain(node: RaftNode, storage: MemoryStorage) -> tuple[list[Entry], list[Message]]:
    applied: list[Entry] = []
    msgs: list[Message] = []
    while node.has_ready():
        rd = node.ready()
        storage.save(rd)
        msgs.extend(rd.messages)
        applied.extend(rd.committed_entries)
        node.advance(rd)
    return applied, msgs


def test_single_node_commits_after_local_persistence() -> None:
    storage = MemoryStorage()
    node = RaftNode(1, [1], storage, random.Random(1))
    node.campaign()
    assert node.role is Role.LEADER and node.term == 1
    idx = node.propose(b"a")
    assert idx == 2  # index 1 is the leader's no-op
    rd = node.ready()
    assert [e.data for e in rd.entries] == [b"", b"a"]
    assert rd.committed_entries == ()  # nothing counts before it is on disk
    assert rd.hard_state == HardState(term=1, vote=1, commit=0)
    storage.save(rd)
    node.advance(rd)
    assert node.committed == 2
    rd = node.ready()
    assert [e.data for e in rd.committed_entries] == [b"", b"a"]
    storage.save(rd)
    node.advance(rd)
    assert not node.has_ready()


def test_single_node_elects_itself_on_timeout_and_replays_after_restart() -> None:
    storage = MemoryStorage()
    node = RaftNode(1, [1], storage, random.Random(2), election_timeout_ticks=5)
    for _ in range(10):
        node.tick()
    assert node.role is Role.LEADER
    drain(node, storage)
    for i in range(3):
        assert isinstance(node.propose(f"r{i}".encode()), int)
    drain(node, storage)
    assert node.committed == 4

    again = RaftNode(1, [1], storage, random.Random(3), election_timeout_ticks=5)
    assert again.term == 1 and again.committed == 4
    applied, _ = drain(again, storage)
    assert [e.data for e in applied] == [b"", b"r0", b"r1", b"r2"]
    again.campaign()
    assert again.role is Role.LEADER and again.term == 2
    applied, _ = drain(again, storage)
    assert [(e.term, e.index, e.data) for e in applied] == [(2, 5, b"")]


def test_propose_on_follower_returns_not_leader_with_hint() -> None:
    sim = SimCluster(3, seed=7)
    assert sim.run_until(lambda: sim.stable_leader() is not None, 200)
    lead = sim.stable_leader()
    assert lead is not None
    follower = next(n for n in sim.live_nodes() if n is not lead)
    assert follower.propose(b"x") == NotLeader(leader_hint=lead.id, term=lead.term)
    with pytest.raises(ValueError):
        lead.propose(b"")


def test_three_nodes_replicate_and_apply() -> None:
    sim = SimCluster(3, seed=11)
    assert sim.run_until(lambda: sim.stable_leader() is not None, 200)
    indexes = [sim.propose(f"v{i}".encode()) for i in range(20)]
    assert all(isinstance(i, int) for i in indexes)
    assert sim.run_until(lambda: sim.all_applied(indexes[-1]), 50)
    sim.checker.check_log_matching(sim.live_nodes())


def _stepped(node: RaftNode, storage: MemoryStorage, m: Message) -> list[Message]:
    node.step(m)
    return drain(node, storage)[1]


def test_leader_commits_earlier_term_entries_only_through_current_term_entry() -> None:
    # Node 1 holds [t1, t2]; it becomes leader of term 3 and appends its no-op at 3.
    storage = MemoryStorage([Entry(1, 1, b"a"), Entry(2, 2, b"b")], HardState(term=2, vote=None, commit=1))
    node = RaftNode(1, [1, 2, 3], storage, random.Random(0))
    node.campaign()
    drain(node, storage)
    for kind in (MessageType.PRE_VOTE_RESP, MessageType.VOTE_RESP):
        term = 3
        _stepped(node, storage, Message(kind, 2, 1, term))
    assert node.role is Role.LEADER and node.term == 3
    drain(node, storage)
    # Follower 2 acknowledges index 2 (a term-2 entry): a majority holds it, but it is
    # not of the current term, so it must not be committed by counting.
    _stepped(node, storage, Message(MessageType.APPEND_RESP, 2, 1, 3, index=2))
    assert node.committed == 1
    _stepped(node, storage, Message(MessageType.APPEND_RESP, 2, 1, 3, index=3))
    assert node.committed == 3


def test_conflict_back_off_skips_whole_terms() -> None:
    # Leader-to-be: 1 x t1, then 30 x t4. Follower: 1 x t1, then 30 x t2 and 30 x t3 (never committed).
    leader_log = [Entry(1, 1, b"base")] + [Entry(4, i, b"L") for i in range(2, 32)]
    follower_log = [Entry(1, 1, b"base")] + [Entry(2, i, b"x") for i in range(2, 32)]
    follower_log += [Entry(3, i, b"y") for i in range(32, 62)]
    s1 = MemoryStorage(leader_log, HardState(term=4, commit=1))
    s2 = MemoryStorage(follower_log, HardState(term=4, commit=1))
    n1 = RaftNode(1, [1, 2], s1, random.Random(0))
    n2 = RaftNode(2, [1, 2], s2, random.Random(0))
    n1.campaign()
    nodes, stores = {1: n1, 2: n2}, {1: s1, 2: s2}
    queue = drain(n1, s1)[1]
    rejections = 0
    for _ in range(500):
        if not queue:
            break
        m = queue.pop(0)
        rejections += m.type is MessageType.APPEND_RESP and m.reject
        queue.extend(_stepped(nodes[m.dst], stores[m.dst], m))
    assert n1.role is Role.LEADER
    assert n2.log.slice(1, n2.last_index + 1) == n1.log.slice(1, n1.last_index + 1)
    assert n2.committed == n1.committed == n1.last_index
    assert rejections <= 2


def test_pre_vote_keeps_a_rejoining_partitioned_node_from_disrupting() -> None:
    sim = SimCluster(3, seed=5)
    assert sim.run_until(lambda: sim.stable_leader() is not None, 200)
    lead = sim.stable_leader()
    assert lead is not None
    term = lead.term
    other = next(i for i in sim.ids if i != lead.id)
    sim.isolate(other)
    sim.run(200)  # it times out over and over, but only ever pre-campaigns
    assert sim.nodes[other].term == term
    sim.heal()
    sim.run(100)
    assert sim.stable_leader() is lead and lead.term == term


def test_check_quorum_makes_an_isolated_leader_step_down() -> None:
    sim = SimCluster(5, seed=9)
    assert sim.run_until(lambda: sim.stable_leader() is not None, 200)
    old = sim.stable_leader()
    assert old is not None
    sim.isolate(old.id)
    sim.run(3 * sim.election_timeout)
    assert old.role is not Role.LEADER
    others = [n for n in sim.live_nodes() if n is not old]
    assert sum(n.role is Role.LEADER for n in others) == 1
    sim.heal()
    assert sim.run_until(lambda: sim.stable_leader() is not None, 200)
    assert sim.stable_leader() is not old


def test_votes_and_terms_survive_restart() -> None:
    storage = MemoryStorage()
    node = RaftNode(1, [1, 2, 3], storage, random.Random(0))
    node.step(Message(MessageType.VOTE, 2, 1, 5, log_term=0, index=0))
    _, msgs = drain(node, storage)
    assert msgs == [Message(MessageType.VOTE_RESP, 1, 2, 5)]
    again = RaftNode(1, [1, 2, 3], storage, random.Random(0))
    assert (again.term, again.vote) == (5, 2)
    again.step(Message(MessageType.VOTE, 3, 1, 5, log_term=0, index=0))
    _, msgs = drain(again, storage)
    assert msgs == [Message(MessageType.VOTE_RESP, 1, 3, 5, reject=True)]


def test_same_seed_same_run() -> None:
    def run(seed: int) -> list[tuple[int, str, int, int, int]]:
        sim = SimCluster(3, seed=seed, drop=0.1, max_delay=3)
        sim.run(150)
        for i in range(5):
            sim.propose(f"p{i}".encode())
        sim.run(50)
        return sim.trace

    assert run(42) == run(42)
    assert run(42) != run(43)


class Manual:
    """Nodes wired by hand: messages are queued and delivered only when a test says so."""

    def __init__(self, logs: dict[int, list[int]], term: int, max_entries: int = 1) -> None:
        from raft_sim import SafetyChecker

        self.checker = SafetyChecker()
        self.stores: dict[int, MemoryStorage] = {}
        self.nodes: dict[int, RaftNode] = {}
        self.queue: list[Message] = []
        for i, terms in logs.items():
            entries = [Entry(t, idx + 1, f"e{idx + 1}t{t}".encode()) for idx, t in enumerate(terms)]
            s = MemoryStorage(entries, HardState(term=term, commit=1))
            self.stores[i] = s
            self.nodes[i] = RaftNode(i, list(logs), s, random.Random(i), max_entries_per_message=max_entries)
            self.checker.last_applied[i] = 0
            self.process(i)

    def process(self, i: int) -> None:
        node, store = self.nodes[i], self.stores[i]
        while node.has_ready():
            rd = node.ready()
            store.save(rd)
            self.checker.on_ready(node, rd)
            self.queue.extend(rd.messages)
            node.advance(rd)
        self.checker.check_node(node)

    def deliver(self, which, rounds: int = 50) -> None:  # type: ignore[no-untyped-def]
        """Deliver, round by round, the queued messages ``which(m)`` selects; keep the others."""
        for _ in range(rounds):
            now = [m for m in self.queue if which(m) and m.dst in self.nodes]
            if not now:
                return
            self.queue = [m for m in self.queue if not (which(m) and m.dst in self.nodes)]
            for m in now:
                self.nodes[m.dst].step(m)
                self.process(m.dst)


def between(*ids: int):  # type: ignore[no-untyped-def]
    return lambda m: m.src in ids and m.dst in ids


def test_figure_8_old_term_entry_is_not_committed_by_counting() -> None:
    # Raft paper figure 8: S5 holds a term-3 entry at index 2 that S1's term-2 entry contests.
    c = Manual({1: [1, 2], 2: [1, 2], 3: [1], 4: [1], 5: [1, 3]}, term=3)
    c.nodes[1].campaign()
    c.process(1)
    votes = (MessageType.PRE_VOTE, MessageType.PRE_VOTE_RESP, MessageType.VOTE, MessageType.VOTE_RESP)
    c.deliver(lambda m: m.src != 5 and m.dst != 5 and m.type in votes)
    lead = c.nodes[1]
    assert lead.role is Role.LEADER and lead.term == 4
    # S1's no-op (index 3) reaches S2; S3 gets only the term-2 entry at index 2.
    c.deliver(between(1, 2))
    c.deliver(between(1, 3), rounds=4)
    assert c.nodes[2].last_index == 3
    assert c.nodes[3].log.term(2) == 2 and c.nodes[3].last_index == 2
    # Index 2 is on S1, S2, S3 (a majority) but is of term 2: it must not be committed.
    assert lead.committed == 1
    # S1 crashes; S5 wins with S3 and S4 and overwrites index 2: nothing committed is lost.
    del c.nodes[1]
    for i in (3, 4):
        for _ in range(30):
            c.nodes[i].tick()
        c.process(i)
    c.queue.clear()
    for _ in range(2):  # the first attempt only teaches S5 the current term
        c.nodes[5].campaign()
        c.process(5)
        c.deliver(between(3, 4, 5))
    assert c.nodes[5].role is Role.LEADER
    assert c.nodes[3].log.term(2) == 3


def test_a_fetched_answer_names_the_leader_but_does_not_renew_its_lease() -> None:
    """A voter that knows no leader fetches committed entries from it: the answer tells it who
    leads (for routing and DescribeCluster), but only the leader's own pushes delay its election
    timeout, so a leader that cannot push to it does not keep it from campaigning."""
    storage = MemoryStorage([Entry(1, 1, b"")], HardState(term=1, vote=None, commit=1))
    node = RaftNode(2, [1, 2, 3], storage, random.Random(5), election_timeout_ticks=10)
    drain(node, storage)
    assert node.leader_id is None
    for _ in range(9):
        node.tick()
    fetched = Message(MessageType.APPEND, 1, 2, 1, log_term=1, index=1,
                      entries=(Entry(1, 2, b"x"),), commit=2, fetched=True)
    node.step(fetched)
    applied, _ = drain(node, storage)
    assert [e.data for e in applied] == [b"x"] and node.leader_id == 1
    assert node.role is Role.FOLLOWER
    for _ in range(11):  # an election timeout counted from before the fetch
        node.tick()
        drain(node, storage)
    assert node.role is Role.PRE_CANDIDATE  # not held back by what it fetched
    pushed = RaftNode(3, [1, 2, 3], MemoryStorage([Entry(1, 1, b"")], HardState(1, None, 1)),
                      random.Random(5), election_timeout_ticks=10)
    for _ in range(9):
        pushed.tick()
    pushed.step(Message(MessageType.HEARTBEAT, 1, 3, 1, commit=1))
    for _ in range(9):
        pushed.tick()
    assert pushed.role is Role.FOLLOWER and pushed.leader_id == 1  # a push renews it
