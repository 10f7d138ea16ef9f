"""A seeded, simulated cluster of RaftNodes: a faulty network, crashes inside Ready processing, snapshots.

Time advances in ticks. A message is dropped with probability ``drop``, sent twice
with probability ``dup``, and otherwise delivered after a random delay of
[min_delay, max_delay] ticks (which reorders messages); messages due in the same
tick are delivered in a random order. Links can be cut (partitions, isolation) and
healed.

Each node is an application: a ``RaftNode``, its storage (``MemoryStorage``, or the
real ``MetadataLogStore`` in a directory) and a state machine (``HashChain``). Its
Ready is processed right after every input, in the shell's order (persist, send,
restore a received snapshot, apply, advance), and with ``crash_in_ready`` the node
may crash at any point of it:

* during the write: what was not synced is lost. A MemoryStorage keeps a random
  prefix of the Ready's steps (received snapshot, each entry, hard state, taken
  snapshot); a MetadataLogStore is stopped by a failpoint at a random durable step
  and its log file is cut back to a random length no shorter than what was synced;
* after the write, having sent none or some of the messages;
* after applying, before ``advance``.

A crashed node restarts from its storage: its state machine comes back from the
snapshot, then it replays the committed entries after it. The application takes
snapshots (``compact`` at its applied index, the data being its state machine)
every ``snapshot_every`` applied entries and whenever a schedule says so.

``SafetyChecker`` looks at every Ready and at every node after every step.

With ``dynamic`` the voters live in the log (kraft.version 1): every node has a directory id,
the initial voters' logs start with the bootstrap control entry (term 0, as formatting writes
it), ``add_node`` starts an empty observer and ``replace_disk`` gives a node a new directory id
and an empty log. Every ``fetch_every`` ticks a node outside the voter set, or one that knows
no leader, fetches committed entries from the node it believes leads (else a random one), as
the shell's observer does; the answer crosses the same faulty network.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import random
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pylog.cluster.metadata_log import MetadataLogStore
from pylog.cluster.raft import Entry, MemoryStorage, Message, MessageType, RaftNode, Ready, Role, Snapshot
from pylog.cluster.voters import (
    KRAFT_VERSION_DYNAMIC,
    ControlBatch,
    VoterNode,
    VoterSet,
    decode_control,
    encode_control,
    is_control,
)

Storage = MemoryStorage | MetadataLogStore
MAX_READY_ROUNDS = 1000  # a node that still has work after this many Readies is spinning


class SafetyViolation(AssertionError):
    pass


class Crash(Exception):
    """Raised from a store failpoint: the process dies at that step."""


def chain_step(digest: bytes, e: Entry) -> bytes:
    head = e.term.to_bytes(8, "big") + e.index.to_bytes(8, "big")
    return hashlib.blake2b(digest + head + e.data, digest_size=16).digest()


class HashChain:
    """The application's state machine: the last applied index and a hash chain over every applied entry."""

    __slots__ = ("digest", "index")

    def __init__(self, index: int = 0, digest: bytes = b"") -> None:
        self.index = index
        self.digest = digest

    def apply(self, e: Entry) -> None:
        if e.index != self.index + 1:
            raise SafetyViolation(f"state machine at {self.index} asked to apply {e.index}")
        self.digest = chain_step(self.digest, e)
        self.index = e.index

    def encode(self) -> bytes:
        return self.index.to_bytes(8, "big") + self.digest

    @classmethod
    def decode(cls, data: bytes) -> HashChain:
        return cls(int.from_bytes(data[:8], "big"), bytes(data[8:]))


@dataclass
class SafetyChecker:
    """Raft's safety properties (Raft paper, figure 3) and the application's, checked incrementally.

    ``committed`` is every entry any node knows to be committed; ``chain`` replays it
    (``chain[i]`` is the state after entries 1..i), so a node's state machine, a
    snapshot or a storage's snapshot plus tail can be compared with the replay.
    """

    leader_of_term: dict[int, int] = field(default_factory=dict)
    # (index, term) -> (data, term of index-1): the log matching property, by induction
    entry_identity: dict[tuple[int, int], tuple[bytes, int | None]] = field(default_factory=dict)
    committed: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    chain: list[bytes] = field(default_factory=lambda: [b""])
    last_applied: dict[int, int] = field(default_factory=dict)
    seen_commit: dict[int, int] = field(default_factory=dict)
    leaders_seen: set[tuple[int, int]] = field(default_factory=set)

    # ------------------------------------------------------------ committed entries

    def record_committed(self, node_id: int, e: Entry) -> None:
        known = self.committed.setdefault(e.index, (e.term, e.data))
        if known != (e.term, e.data):
            raise SafetyViolation(f"committed entry {e.index} differs on node {node_id}: {known} vs {e}")
        while len(self.chain) in self.committed:
            i = len(self.chain)
            term, data = self.committed[i]
            self.chain.append(chain_step(self.chain[-1], Entry(term, i, data)))

    # ------------------------------------------------------------ per Ready

    def on_ready(self, node: RaftNode, rd: Ready) -> None:
        for e in rd.entries:
            prev = node.log.term(e.index - 1)
            ident = (e.data, prev)
            known = self.entry_identity.setdefault((e.index, e.term), ident)
            if known != ident:
                raise SafetyViolation(f"log matching: ({e.index}, {e.term}) differs on node {node.id}")
        if rd.snapshot is not None:
            self.check_snapshot(node.id, rd.snapshot)
            if rd.snapshot.index <= self.last_applied.get(node.id, 0):
                raise SafetyViolation(f"node {node.id} restored {rd.snapshot.index} over a newer state")
            self.last_applied[node.id] = rd.snapshot.index
        if rd.snapshot_taken is not None:
            self.check_snapshot(node.id, rd.snapshot_taken)
        for e in rd.committed_entries:
            self.on_apply(node.id, e)

    def on_apply(self, node_id: int, e: Entry) -> None:
        expected = self.last_applied.get(node_id, 0) + 1
        if e.index != expected:
            raise SafetyViolation(f"node {node_id} applied {e.index}, expected {expected}")
        self.last_applied[node_id] = e.index
        self.record_committed(node_id, e)

    def on_restart(self, node: RaftNode) -> None:
        self.last_applied[node.id] = node.applied
        self.seen_commit[node.id] = node.log.start_index

    # ------------------------------------------------------------ the application

    def check_snapshot(self, node_id: int, snap: Snapshot) -> None:
        """A snapshot is the replay of the committed log up to its index."""
        sm = HashChain.decode(snap.data)
        if sm.index != snap.index:
            raise SafetyViolation(f"node {node_id}: snapshot at {snap.index} holds state at {sm.index}")
        if snap.index >= len(self.chain) or self.chain[snap.index] != sm.digest:
            raise SafetyViolation(f"node {node_id}: snapshot at {snap.index} is not the replay of the log")
        if self.committed[snap.index][0] != snap.term:
            raise SafetyViolation(f"node {node_id}: snapshot at {snap.index} has term {snap.term}")

    def check_state(self, node_id: int, sm: HashChain) -> None:
        """A state machine is the replay of the committed log up to what it applied."""
        if sm.index >= len(self.chain) or self.chain[sm.index] != sm.digest:
            raise SafetyViolation(f"node {node_id}: state machine at {sm.index} is not the replay of the log")

    def check_storage(self, node_id: int, storage: Storage) -> None:
        """Snapshot plus tail equals the full log, up to the persisted commit index."""
        snap = storage.snapshot()
        sm = HashChain()
        if snap is not None:
            self.check_snapshot(node_id, snap)
            sm = HashChain.decode(snap.data)
        commit = storage.hard_state().commit
        prev_index, prev_term = sm.index, snap.term if snap is not None else 0
        for e in storage.entries():
            if e.index != prev_index + 1:
                raise SafetyViolation(f"node {node_id}: stored log has {e.index} after {prev_index}")
            known = self.entry_identity.get((e.index, e.term))
            if known is not None and known != (e.data, prev_term):
                raise SafetyViolation(f"log matching: stored ({e.index}, {e.term}) differs on node {node_id}")
            prev_index, prev_term = e.index, e.term
            if e.index > commit:
                continue
            self.record_committed(node_id, e)
            sm.apply(e)
        if sm.index < commit:
            raise SafetyViolation(f"node {node_id}: stored commit {commit} is beyond its log ({sm.index})")
        self.check_state(node_id, sm)

    # ------------------------------------------------------------ per node

    def check_node(self, node: RaftNode) -> None:
        seen = self.seen_commit.get(node.id, 0)
        if node.committed > seen:
            seen = max(seen, node.log.start_index)
            for i in range(seen + 1, node.committed + 1):
                self.record_committed(node.id, node.log.entry(i))
            self.seen_commit[node.id] = node.committed
        if node.role is not Role.LEADER:
            return
        pending = node._history.changes_after(node.committed)
        if len(pending) > 1:
            raise SafetyViolation(f"leader {node.id} has {len(pending)} uncommitted voter changes")
        leader = self.leader_of_term.setdefault(node.term, node.id)
        if leader != node.id:
            raise SafetyViolation(f"election safety: term {node.term} has leaders {leader} and {node.id}")
        if (node.id, node.term) not in self.leaders_seen:
            self.leaders_seen.add((node.id, node.term))
            self.check_leader_completeness(node)

    def check_leader_completeness(self, node: RaftNode) -> None:
        start = node.log.start_index
        if node.snapshot is not None:
            self.check_snapshot(node.id, node.snapshot)
        for index, (term, _data) in self.committed.items():
            if index > start and node.log.term(index) != term:
                raise SafetyViolation(
                    f"leader completeness: leader {node.id} of term {node.term} lacks committed {index}"
                )

    def check_voter_changes(self) -> None:
        """Along the committed log, each voter set differs from the one before by one voter at most."""
        prev: VoterSet | None = None
        for index in sorted(self.committed):
            data = self.committed[index][1]
            if not is_control(data):
                continue
            voters = decode_control(data).voters
            if voters is None:
                continue
            if prev is not None and not prev.overlapping_majority(voters):
                raise SafetyViolation(f"voter change at {index} from {prev} to {voters} is not single-server")
            prev = voters

    @staticmethod
    def check_log_matching(nodes: list[RaftNode]) -> None:
        """Full pairwise check: equal (index, term) implies identical entries below, where both hold them."""
        for i, a in enumerate(nodes):
            for b in nodes[i + 1 :]:
                lo = max(a.log.start_index, b.log.start_index) + 1
                top = 0
                for idx in range(lo, min(a.last_index, b.last_index) + 1):
                    if a.log.term(idx) == b.log.term(idx):
                        top = idx
                if top and a.log.slice(lo, top + 1) != b.log.slice(lo, top + 1):
                    raise SafetyViolation(f"log matching: nodes {a.id} and {b.id} differ below {top}")


class SimCluster:
    def __init__(
        self,
        n: int,
        seed: int,
        *,
        drop: float = 0.0,
        dup: float = 0.0,
        min_delay: int = 0,
        max_delay: int = 1,
        election_timeout: int = 10,
        heartbeat: int = 1,
        max_entries: int = 64,
        max_inflight: int = 64,
        data_dir: Path | None = None,
        crash_in_ready: float = 0.0,
        snapshot_every: int = 0,
        dynamic: bool = False,
        fetch_every: int = 2,
    ) -> None:
        """``data_dir`` set: each node keeps a MetadataLogStore under it, else a MemoryStorage."""
        self.max_entries = max_entries
        self.max_inflight = max_inflight
        self.rng = random.Random(seed)
        self.ids = list(range(1, n + 1))  # every node of the simulation, voter or not
        self.dynamic = dynamic
        self.fetch_every = fetch_every
        self.dirs: dict[int, uuid.UUID] = {i: self._new_dir() for i in self.ids}
        self.fetch_target: dict[int, int | None] = {}
        self.drop = drop
        self.dup = dup
        self.min_delay = min_delay
        self.max_delay = max_delay
        self.election_timeout = election_timeout
        self.heartbeat = heartbeat
        self.data_dir = data_dir
        self.crash_in_ready = crash_in_ready
        self.max_down = (n - 1) // 2  # crashes inside Ready processing keep a quorum up
        self.snapshot_every = snapshot_every
        self.storages: dict[int, Storage] = {}
        self.machines: dict[int, HashChain] = {}
        self.nodes: dict[int, RaftNode] = {}
        self.down: set[int] = set()
        self.cut_links: set[frozenset[int]] = set()
        self.cut_push: set[tuple[int, int]] = set()
        self.checker = SafetyChecker()
        self.stats: Counter[str] = Counter()
        self.now = 0
        self._queue: list[tuple[int, float, int, Message]] = []
        self._seq = 0
        self.delivered = 0
        self.trace: list[tuple[int, str, int, int, int]] = []
        bootstrap = self.bootstrap_entry() if dynamic else None
        for i in self.ids:
            if data_dir is None:
                self.storages[i] = MemoryStorage([bootstrap] if bootstrap else [])
            elif bootstrap is not None:
                store = self._open_store(i)
                store.save(Ready(None, (bootstrap,), (), (), Role.FOLLOWER, None))
                store.close()
            self._start(i)

    def _new_dir(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def voter_node(self, i: int) -> VoterNode:
        return VoterNode(i, self.dirs[i])

    def bootstrap_entry(self) -> Entry:
        """What formatting the initial controllers writes: kraft.version 1 and the voters, term 0."""
        voters = VoterSet(tuple(self.voter_node(i) for i in self.ids))
        return Entry(0, 1, encode_control(ControlBatch(KRAFT_VERSION_DYNAMIC, voters)))

    def add_node(self) -> int:
        """Start a new, empty node (an observer until a leader adds it); returns its id."""
        i = max(self.ids) + 1
        self.ids.append(i)
        self.dirs[i] = self._new_dir()
        if self.data_dir is None:
            self.storages[i] = MemoryStorage()
        self._start(i)
        return i

    def replace_disk(self, i: int) -> None:
        """Node ``i`` loses its disk: it comes back empty, with a new directory id."""
        self.crash(i)
        self.dirs[i] = self._new_dir()
        if self.data_dir is None:
            self.storages[i] = MemoryStorage()
        else:
            import shutil

            shutil.rmtree(self.data_dir / f"node-{i}", ignore_errors=True)
        self.down.discard(i)
        self._start(i)

    # ------------------------------------------------------------- nodes

    def _open_store(self, i: int) -> MetadataLogStore:
        assert self.data_dir is not None
        return MetadataLogStore(self.data_dir / f"node-{i}", fsync=False)

    def _start(self, i: int) -> None:
        if self.data_dir is not None:
            self.storages[i] = self._open_store(i)
        storage = self.storages[i]
        self.checker.check_storage(i, storage)
        snap = storage.snapshot()
        self.machines[i] = HashChain.decode(snap.data) if snap is not None else HashChain()
        node = RaftNode(
            i,
            None if self.dynamic else self.ids,
            storage,
            random.Random(self.rng.getrandbits(64)),
            self.election_timeout,
            self.heartbeat,
            max_entries_per_message=self.max_entries,
            max_inflight=self.max_inflight,
            directory_id=self.dirs[i] if self.dynamic else None,
        )
        self.nodes[i] = node
        self.checker.on_restart(node)
        self.checker.check_node(node)

    def crash(self, i: int) -> None:
        """Lose everything not persisted; the node stays down until ``restart``."""
        if i in self.down:
            return
        self.down.add(i)
        self.nodes.pop(i, None)
        self.stats["crashes"] += 1
        storage = self.storages[i]
        if isinstance(storage, MetadataLogStore):
            storage.close()

    def restart(self, i: int) -> None:
        if i in self.down:
            self.down.discard(i)
            self._start(i)

    def live_nodes(self) -> list[RaftNode]:
        return [self.nodes[i] for i in self.ids if i not in self.down]

    def leaders(self) -> list[RaftNode]:
        return [n for n in self.live_nodes() if n.role is Role.LEADER]

    def close(self) -> None:
        for storage in self.storages.values():
            if isinstance(storage, MetadataLogStore):
                storage.close()

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

    def cut_pushes(self, src: int, dst: int) -> None:
        """Lose what ``src`` pushes to ``dst`` (its own messages), while ``dst`` still reaches
        ``src`` and still gets answers to its fetches from it."""
        self.cut_push.add((src, dst))

    def heal(self) -> None:
        self.cut_links.clear()
        self.cut_push.clear()

    def _connected(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cut_links

    def _send(self, m: Message) -> None:
        if m.type is MessageType.SNAPSHOT:
            self.stats["snapshots_sent"] += 1
        copies = 2 if self.dup and self.rng.random() < self.dup else 1
        for _ in range(copies):
            if not self._connected(m.src, m.dst) or (self.drop and self.rng.random() < self.drop):
                continue
            if not m.fetched and (m.src, m.dst) in self.cut_push:
                continue
            at = self.now + self.rng.randint(self.min_delay, self.max_delay)
            self._seq += 1
            heapq.heappush(self._queue, (at, self.rng.random(), self._seq, m))

    # ------------------------------------------------------------- Ready processing

    def process(self, node: RaftNode) -> None:
        i = node.id
        if not node.has_ready():
            self.checker.check_node(node)
            return
        for _ in range(MAX_READY_ROUNDS):
            if self.nodes.get(i) is not node or not node.has_ready():
                break
            rd = node.ready()
            self.checker.on_ready(node, rd)
            stage = self._crash_stage(rd)
            if stage is not None:
                self.stats[f"crash_in_{stage}"] += 1
            if stage == "save":
                self._save_partially(i, rd)
                self.crash(i)
                return
            storage = self.storages[i]
            storage.save(rd)
            if rd.snapshot is not None or rd.snapshot_taken is not None:
                self.checker.check_storage(i, storage)
            if stage == "send":
                for m in rd.messages[: self.rng.randint(0, len(rd.messages))]:
                    self._send(m)
                self.crash(i)
                return
            for m in rd.messages:
                self._send(m)
            if rd.snapshot is not None:
                self.machines[i] = HashChain.decode(rd.snapshot.data)
                self.stats["snapshots_restored"] += 1
            sm = self.machines[i]
            for e in rd.committed_entries:
                sm.apply(e)
            self.checker.check_state(i, sm)
            if stage == "advance":
                self.crash(i)
                return
            node.advance(rd)
            if not node.has_ready() and self._wants_snapshot(node):
                self.compact(i)
        else:
            raise SafetyViolation(f"node {i} still has work after {MAX_READY_ROUNDS} Readies")
        if self.nodes.get(i) is node:
            self.checker.check_node(node)

    def _crash_stage(self, rd: Ready) -> str | None:
        # Readies that install a snapshot are rare and have the most steps: crash in them more.
        odds = self.crash_in_ready * (10 if rd.snapshot or rd.snapshot_taken else 1)
        if not odds or self.rng.random() >= odds:
            return None
        if len(self.down) >= self.max_down:
            return None
        if rd.entries or rd.hard_state or rd.snapshot or rd.snapshot_taken:
            return self.rng.choice(("save", "save", "send", "advance"))
        return self.rng.choice(("send", "advance"))  # nothing to write

    def _save_partially(self, i: int, rd: Ready) -> None:
        """A crash in the middle of ``save``: only what was synced before it survives."""
        storage = self.storages[i]
        if isinstance(storage, MemoryStorage):
            steps: list[str] = []
            if rd.snapshot is not None:
                steps.append("snapshot")
            steps += ["entry"] * len(rd.entries)
            if rd.hard_state is not None:
                steps.append("hard_state")
            if rd.snapshot_taken is not None:
                steps.append("snapshot_taken")
            done = steps[: self.rng.randrange(len(steps) + 1)]
            storage.save(
                dataclasses.replace(
                    rd,
                    snapshot=rd.snapshot if "snapshot" in done else None,
                    entries=rd.entries[: done.count("entry")],
                    hard_state=rd.hard_state if "hard_state" in done else None,
                    snapshot_taken=rd.snapshot_taken if "snapshot_taken" in done else None,
                    messages=(),
                )
            )
            return
        # Durable steps of this save (see MetadataLogStore): crash before one of them, or after all.
        steps = 2 * (bool(rd.entries) + bool(rd.hard_state))
        steps += 6 * (bool(rd.snapshot) + bool(rd.snapshot_taken))
        countdown = self.rng.randint(0, steps)

        def failpoint(step: str) -> None:
            nonlocal countdown
            if countdown == 0:
                raise Crash(step)
            countdown -= 1

        storage.failpoint = failpoint
        try:
            storage.save(rd)
        except Crash as crash:
            self.stats[f"store_crash_at_{crash.args[0]}"] += 1
        storage.failpoint = None
        storage.close()
        path, synced = storage.log_path, storage.synced_end
        size = path.stat().st_size if path.exists() else 0
        if size > synced:
            with open(path, "r+b") as f:
                f.truncate(self.rng.randint(synced, size))

    def _wants_snapshot(self, node: RaftNode) -> bool:
        every = self.snapshot_every
        return bool(every) and node.applied - node.log.start_index >= every and self.rng.random() < 0.5

    def compact(self, i: int) -> bool:
        """The application snapshots node ``i`` at its applied index (if it has anything new)."""
        node = self.nodes.get(i)
        if node is None or node.applied <= node.log.start_index:
            return False
        sm = self.machines[i]
        assert sm.index == node.applied, (sm.index, node.applied)
        node.compact(node.applied, sm.encode())
        self.stats["compactions"] += 1
        self.process(node)
        return True

    # ------------------------------------------------------------- driving

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
            node = self.nodes.get(m.dst)
            if node is None or not self._connected(m.src, m.dst):
                continue
            node.step(m)
            self.delivered += 1
            self.trace.append((self.now, m.type.value, m.src, m.dst, m.term))
            self.process(node)
        for node in self.live_nodes():
            if self.nodes.get(node.id) is node:
                node.tick()
                self.process(node)
        if self.dynamic and self.now % self.fetch_every == 0:
            for node in self.live_nodes():
                if not node.is_voter or node.leader_id is None:
                    self.observer_fetch(node)

    def observer_fetch(self, node: RaftNode) -> None:
        """``node`` fetches committed entries from whom it believes leads (the shell's observer)."""
        live = [i for i in self.ids if i not in self.down and i != node.id]
        target = self.fetch_target.get(node.id)
        if target not in live:
            target = node.leader_id if node.leader_id in live else (self.rng.choice(live) if live else None)
        if target is None or not self._connected(node.id, target):
            self.fetch_target.pop(node.id, None)
            return
        asked = self.nodes[target]
        answer = asked.observer_fetch(node.id, node.directory_id, node.committed + 1, self.max_entries)
        if answer is None:  # not the leader: it names the one it knows, as NOT_LEADER answers do
            self.fetch_target[node.id] = asked.leader_id if asked.leader_id != target else None
            return
        self.fetch_target[node.id] = target
        self.stats["observer_fetches"] += 1
        self._send(answer)

    def run(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def run_until(self, predicate: Callable[[], bool], max_ticks: int) -> bool:
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

    def check_everything(self) -> None:
        """The slow checks: pairwise log matching, every storage, every state machine."""
        live = self.live_nodes()
        self.checker.check_log_matching(live)
        self.checker.check_voter_changes()
        for node in live:
            self.checker.check_node(node)
            self.checker.check_storage(node.id, self.storages[node.id])
            self.checker.check_state(node.id, self.machines[node.id])

