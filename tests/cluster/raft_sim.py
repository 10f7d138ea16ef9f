"""A seeded, simulated network for RaftNode: drop, delay, reorder, cut, isolate, crash.

Time advances in ticks. Every message gets a random delay in [min_delay, max_delay]
ticks (which reorders messages); messages due in the same tick are delivered in a
random order. Each node's Ready is processed right after every input, and the
``SafetyChecker`` looks at the cluster after every step.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from pylog.cluster.raft import Entry, MemoryStorage, Message, RaftNode, Ready, Role


class SafetyViolation(AssertionError):
    pass


@dataclass
class SafetyChecker:
    """Raft's safety properties (Raft paper, figure 3), checked incrementally."""

    leader_of_term: dict[int, int] = field(default_factory=dict)
    # (index, term) -> (data, term of index-1): the log matching property, by induction
    entry_identity: dict[tuple[int, int], tuple[bytes, int | None]] = field(default_factory=dict)
    # index -> (term, data) of what any node applied
    applied: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    last_applied: dict[int, int] = field(default_factory=dict)
    leaders_seen: set[tuple[int, int]] = field(default_factory=set)

    def on_ready(self, node: RaftNode, rd: Ready) -> None:
        for e in rd.entries:
            prev = node.log.term(e.index - 1)
            ident = (e.data, prev)
            known = self.entry_identity.setdefault((e.index, e.term), ident)
            if known != ident:
                raise SafetyViolation(f"log matching: ({e.index}, {e.term}) differs on node {node.id}")
        for e in rd.committed_entries:
            self.on_apply(node.id, e)

    def on_apply(self, node_id: int, e: Entry) -> None:
        expected = self.last_applied.get(node_id, 0) + 1
        if e.index != expected:
            raise SafetyViolation(f"node {node_id} applied {e.index}, expected {expected}")
        self.last_applied[node_id] = e.index
        known = self.applied.setdefault(e.index, (e.term, e.data))
        if known != (e.term, e.data):
            raise SafetyViolation(f"state machine safety: index {e.index} differs on node {node_id}")

    def on_restart(self, node: RaftNode) -> None:
        self.last_applied[node.id] = node.applied

    def check_node(self, node: RaftNode) -> None:
        if node.role is not Role.LEADER:
            return
        leader = self.leader_of_term.setdefault(node.term, node.id)
        if leader != node.id:
            raise SafetyViolation(f"election safety: term {node.term} has leaders {leader} and {node.id}")
        if (node.id, node.term) not in self.leaders_seen:
            self.leaders_seen.add((node.id, node.term))
            self.check_leader_completeness(node)

    def check_leader_completeness(self, node: RaftNode) -> None:
        for index, (term, _data) in self.applied.items():
            if node.log.term(index) != term:
                raise SafetyViolation(
                    f"leader completeness: leader {node.id} of term {node.term} lacks committed {index}"
                )

    @staticmethod
    def check_log_matching(nodes: list[RaftNode]) -> None:
        """Full pairwise check: equal (index, term) implies identical prefixes."""
        for i, a in enumerate(nodes):
            for b in nodes[i + 1 :]:
                top = 0
                for idx in range(1, min(a.last_index, b.last_index) + 1):
                    if a.log.term(idx) == b.log.term(idx):
                        top = idx
                if top and a.log.slice(1, top + 1) != b.log.slice(1, top + 1):
                    raise SafetyViolation(f"log matching: nodes {a.id} and {b.id} differ below {top}")


class SimCluster:
    def __init__(
        self,
        n: int,
        seed: int,
        *,
        drop: float = 0.0,
        min_delay: int = 0,
        max_delay: int = 1,
        election_timeout: int = 10,
        heartbeat: int = 1,
        max_entries: int = 64,
        max_inflight: int = 64,
    ) -> None:
        self.max_entries = max_entries
        self.max_inflight = max_inflight
        self.rng = random.Random(seed)
        self.ids = list(range(1, n + 1))
        self.drop = drop
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.election_timeout = election_timeout
        self.heartbeat = heartbeat
        self.storages = {i: MemoryStorage() for i in self.ids}
        self.nodes: dict[int, RaftNode] = {}
        self.down: set[int] = set()
        self.cut_links: set[frozenset[int]] = set()
        self.checker = SafetyChecker()
        self.now = 0
        self._queue: list[tuple[int, float, int, Message]] = []
        self._seq = 0
        self.delivered = 0
        self.trace: list[tuple[int, str, int, int, int]] = []
        for i in self.ids:
            self._start(i)

    # ------------------------------------------------------------- nodes

    def _start(self, i: int) -> None:
        node = RaftNode(
            i,
            self.ids,
            self.storages[i],
            random.Random(self.rng.getrandbits(64)),
            self.election_timeout,
            self.heartbeat,
            max_entries_per_message=self.max_entries,
            max_inflight=self.max_inflight,
        )
        self.nodes[i] = node
        self.checker.on_restart(node)

    def crash(self, i: int) -> None:
        """Lose everything not persisted; the node stays down until ``restart``."""
        self.down.add(i)
        self.nodes.pop(i, None)

    def restart(self, i: int) -> None:
        if i in self.down:
            self.down.discard(i)
            self._start(i)

    def live_nodes(self) -> list[RaftNode]:
        return [self.nodes[i] for i in self.ids if i not in self.down]

    def leaders(self) -> list[RaftNode]:
        return [n for n in self.live_nodes() if n.role is Role.LEADER]

    # ------------------------------------------------------------- network

    def cut(self, a: int, b: int) -> None:
        self.cut_links.add(frozenset((a, b)))

    def isolate(self, a: int) -> None:
        for b in self.ids:
            if b != a:
                self.cut(a, b)

    def partition(self, *groups: list[int]) -> None:
        for gi, g in enumerate(groups):
            for h in groups[gi + 1 :]:
                for a in g:
                    for b in h:
                        self.cut(a, b)

    def heal(self) -> None:
        self.cut_links.clear()

    def _connected(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut_links

    def _send(self, m: Message) -> None:
        if not self._connected(m.src, m.dst) or (self.drop and self.rng.random() < self.drop):
            return
        at = self.now + self.rng.randint(self.min_delay, self.max_delay)
        self._seq += 1
        heapq.heappush(self._queue, (at, self.rng.random(), self._seq, m))

    # ------------------------------------------------------------- driving

    def process(self, node: RaftNode) -> None:
        storage = self.storages[node.id]
        while node.has_ready():
            rd = node.ready()
            storage.save(rd)
            self.checker.on_ready(node, rd)
            for m in rd.messages:
                self._send(m)
            node.advance(rd)
        self.checker.check_node(node)

    def propose(self, data: bytes) -> int | None:
        for node in self.leaders():
            result = node.propose(data)
            self.process(node)
            if isinstance(result, int):
                return result
        return None

    def tick(self) -> None:
        self.now += 1
        while self._queue and self._queue[0][0] <= self.now:
            _, _, _, m = heapq.heappop(self._queue)
            if m.dst in self.down or not self._connected(m.src, m.dst):
                continue
            node = self.nodes[m.dst]
            node.step(m)
            self.delivered += 1
            self.trace.append((self.now, m.type.value, m.src, m.dst, m.term))
            self.process(node)
        for node in self.live_nodes():
            node.tick()
            self.process(node)

    def run(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def run_until(self, predicate, max_ticks: int) -> bool:  # type: ignore[no-untyped-def]
        for _ in range(max_ticks):
            if predicate():
                return True
            self.tick()
        return bool(predicate())

    # ------------------------------------------------------------- liveness helpers

    def stable_leader(self) -> RaftNode | None:
        """The leader every live node follows, if there is one."""
        leaders = self.leaders()
        if len(leaders) != 1:
            return None
        lead = leaders[0]
        for n in self.live_nodes():
            if n.term != lead.term or n.leader_id != lead.id:
                return None
        return lead

    def all_applied(self, index: int) -> bool:
        return all(n.applied >= index for n in self.live_nodes())
