"""What a Raft node knows of its voters, and how a leader changes them (KIP-853), one at a time.

``Membership`` is a part of ``RaftNode`` (see raft.py for the theory of operation): the voter set
in force and the history of it along the log (``VoterHistory``), the checks a leader makes before
appending a voter change (Kafka's AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler, in
their order and with their errors), and the answers to observers' fetches of committed entries,
which tell the leader who is catching up and how far.

The voters are a ``VoterSet`` of replica keys (node id and metadata directory id). With
kraft.version 0 it is the static set the node is built with; with kraft.version 1 it lives in the
log, as control entries (``voters.py``) and in snapshots, and the latest one in a node's log is in
force at once, committed or not. The leader changes it one voter at a time (``add_voter`` /
``remove_voter`` / ``update_voter``) and only once its previous change and an entry of its own
term are committed, so consecutive sets share a majority. A new voter is caught up first as an
*observer*: a node outside the voter set never campaigns; it pulls committed entries from the
leader (``observer_fetch`` builds the APPEND or SNAPSHOT that answers such a fetch; the shell
carries it) and the leader counts it as caught up once a fetch of it starts at the commit index.
Votes are counted, and acknowledgements of entries, only from replicas whose key is in the voter
set; a message addressed to another directory id of this node id is dropped, so a controller on a
replaced disk never stands in for the one that was lost. A leader keeps replicating to voters a
pending change removes until the change commits; a leader that the committed set no longer holds
resigns, telling the voters that remain (END_QUORUM_EPOCH) so the most caught-up of them campaigns
at once.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from pylog.cluster.progress import Progress
from pylog.cluster.raft_log import RaftLog
from pylog.cluster.raft_types import Entry, Message, MessageType, NotLeader, Role, Snapshot
from pylog.cluster.voters import (
    KRAFT_VERSION_DYNAMIC,
    ControlBatch,
    VoterHistory,
    VoterNode,
    VoterSet,
    VoterState,
    decode_control,
    encode_control,
    is_control,
)
from pylog.protocol.errors import ErrorCode

_MT = MessageType
OBSERVER_EXPIRY_ELECTIONS = 100  # an observer unheard for this many election timeouts is forgotten


@dataclass(frozen=True, slots=True)
class VoterChangeRefused:
    """Why the leader did not append a voter change (Kafka's error for AddRaftVoter & co.)."""

    error: ErrorCode
    message: str


@dataclass(slots=True)
class ObserverState:
    """What the leader knows of a replica outside the voter set that fetches from it."""

    directory_id: uuid.UUID | None
    fetch_offset: int
    last_fetch_tick: int
    caught_up_tick: int  # last fetch that started at the commit index (-1: never)


class Membership:
    """The voter-set half of ``RaftNode``; it reads and writes the node's state directly."""

    id: int
    directory_id: uuid.UUID | None
    role: Role
    term: int
    committed: int
    leader_id: int | None
    election_timeout: int
    log: RaftLog
    _static: VoterSet | None
    _history: VoterHistory
    _snapshot: Snapshot | None
    _progress: dict[int, Progress]
    _observers: dict[int, ObserverState]
    _leader_start: int
    _ticks: int
    _rng: random.Random

    def _sync_progress(self) -> None: ...

    def _maybe_commit(self) -> bool:
        raise NotImplementedError  # RaftNode's

    def _after_commit(self) -> None: ...

    def _bcast_append(self) -> None: ...

    # ------------------------------------------------------------------ voters

    def _base_state(self, snap: Snapshot | None) -> VoterState:
        index = snap.index if snap is not None else 0
        if snap is not None and snap.voters is not None:
            return VoterState(index, snap.voters, snap.kraft_version)
        return VoterState(index, self._static, 0)

    def _scan_control(self, start: int) -> bool:
        """Record the control entries of the log from ``start`` on; True if the voters changed."""
        changed = False
        for e in self.log.slice(start, self.log.last_index() + 1):
            if is_control(e.data):
                changed |= self._history.append(e.index, decode_control(e.data))
        return changed

    @property
    def voter_set(self) -> VoterSet | None:
        """The voters in force: the latest set in this node's log (committed or not)."""
        return self._history.latest.voters

    @property
    def committed_voter_set(self) -> VoterSet | None:
        return self._history.at(self.committed).voters

    @property
    def voters(self) -> tuple[int, ...]:
        vs = self.voter_set
        return vs.ids if vs is not None else ()

    @property
    def quorum(self) -> int:
        vs = self.voter_set
        return vs.quorum if vs is not None else 1

    @property
    def kraft_version(self) -> int:
        return self._history.latest.kraft_version

    @property
    def voter_change_pending(self) -> bool:
        """The latest voter change is not committed yet."""
        return self._history.latest.index > self.committed

    @property
    def is_voter(self) -> bool:
        vs = self.voter_set
        return vs is not None and vs.is_voter(self.id, self.directory_id)

    def _member(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """A replica the leader replicates to: a voter now, or one of the last committed set."""
        vs, committed = self.voter_set, self.committed_voter_set
        return (vs is not None and vs.is_voter(node_id, directory_id)) or (
            committed is not None and committed.is_voter(node_id, directory_id)
        )

    def _dir_of(self, node_id: int) -> uuid.UUID | None:
        for vs in (self.voter_set, self.committed_voter_set):
            v = vs.get(node_id) if vs is not None else None
            if v is not None:
                return v.directory_id
        return None

    # ------------------------------------------------------------------ voter changes (leader)

    def add_voter(self, voter: VoterNode, *, max_lag: int = 0) -> int | VoterChangeRefused | NotLeader:
        """Append a voter set with ``voter`` added; its index, or why not (Kafka's AddVoterHandler).

        The new voter must be an observer that fetched within the last election timeout and was
        caught up then (a fetch from the commit index), or whose latest fetch started no more than
        ``max_lag`` entries behind it (Kafka's ``isReplicaCaughtUp``)."""
        refused = self._refuse_change()
        if refused is not None:
            return refused
        vs = self.voter_set
        assert vs is not None
        new = vs.add(voter)
        if new is None:
            return VoterChangeRefused(
                ErrorCode.DUPLICATE_VOTER, f"node {voter.node_id} is already a voter of {vs}"
            )
        obs = self._observers.get(voter.node_id)
        if obs is None or obs.directory_id != voter.directory_id:
            return VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                f"replica {voter.node_id}:{voter.directory_id} is not fetching from the leader",
            )
        recent = self._ticks - obs.last_fetch_tick <= self.election_timeout
        caught_up = self._ticks - obs.caught_up_tick <= self.election_timeout
        if not recent or not (caught_up or obs.fetch_offset - 1 >= self.committed - max_lag):
            return VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                f"replica {voter.node_id} is lagging behind (fetching from {obs.fetch_offset}, "
                f"commit index {self.committed})",
            )
        return self._append_voters(new)

    def remove_voter(
        self, node_id: int, directory_id: uuid.UUID | None
    ) -> int | VoterChangeRefused | NotLeader:
        """Append a voter set without voter (node_id, directory_id) (Kafka's RemoveVoterHandler)."""
        refused = self._refuse_change()
        if refused is not None:
            return refused
        vs = self.voter_set
        assert vs is not None
        v = vs.get(node_id)
        if v is None or v.directory_id != directory_id:
            return VoterChangeRefused(
                ErrorCode.VOTER_NOT_FOUND, f"{node_id}:{directory_id} is not a voter of {vs}"
            )
        new = vs.remove(node_id, directory_id)
        if new is None:
            return VoterChangeRefused(ErrorCode.INVALID_REQUEST, f"cannot remove the last voter {node_id}")
        return self._append_voters(new)

    def update_voter(self, voter: VoterNode) -> int | VoterChangeRefused | NotLeader:
        """Append a voter set with ``voter``'s endpoints and versions updated (UpdateVoterHandler)."""
        refused = self._refuse_change()
        if refused is not None:
            return refused
        vs = self.voter_set
        assert vs is not None
        new = vs.update(voter)
        if new is None:
            return VoterChangeRefused(
                ErrorCode.VOTER_NOT_FOUND, f"{voter.node_id}:{voter.directory_id} is not a voter of {vs}"
            )
        if new == vs:
            return self._history.latest.index
        return self._append_voters(new)

    def _refuse_change(self) -> VoterChangeRefused | NotLeader | None:
        if self.role is not Role.LEADER:
            return NotLeader(self.leader_id, self.term)
        if self.committed < self._leader_start:
            return VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                "waiting for the leader to commit an entry of its epoch (fencing earlier voter changes)",
            )
        if self.kraft_version < KRAFT_VERSION_DYNAMIC or self.voter_set is None:
            return VoterChangeRefused(
                ErrorCode.UNSUPPORTED_VERSION,
                f"the voters are static (kraft.version {self.kraft_version}): controller.quorum.voters",
            )
        if self.voter_change_pending:
            return VoterChangeRefused(
                ErrorCode.REQUEST_TIMED_OUT,
                f"waiting for the voter change at {self._history.latest.index} to commit "
                f"(commit index {self.committed})",
            )
        return None

    def _append_voters(self, new: VoterSet) -> int:
        entry = Entry(self.term, self.log.last_index() + 1, encode_control(ControlBatch(voters=new)))
        self.log.append(entry)
        self._history.append(entry.index, ControlBatch(voters=new))
        self._sync_progress()
        if self._maybe_commit():  # a removal can commit at once (e.g. a lagging voter leaves)
            self._after_commit()
        self._bcast_append()
        return entry.index

    # ------------------------------------------------------------------ observers (leader)

    def observer_fetch(
        self, replica_id: int, directory_id: uuid.UUID | None, fetch_offset: int, max_entries: int
    ) -> Message | None:
        """Answer a fetch of committed entries from ``fetch_offset`` by a replica that follows the
        log without the leader pushing to it (an observer, or a voter that lost touch): the APPEND
        carrying them, or the SNAPSHOT when they are compacted; None when this node cannot answer
        (not the leader, or the replica is ahead of what it knows). Records the replica as an
        observer when it is not a voter."""
        if self.role is not Role.LEADER:
            return None
        vs = self.voter_set
        if vs is None or not vs.is_voter(replica_id, directory_id):
            obs = self._observers.get(replica_id)
            caught_up = fetch_offset - 1 >= self.committed
            if obs is None or obs.directory_id != directory_id:
                obs = self._observers[replica_id] = ObserverState(directory_id, fetch_offset, self._ticks, -1)
            obs.fetch_offset, obs.last_fetch_tick = fetch_offset, self._ticks
            if caught_up:
                obs.caught_up_tick = self._ticks
        prev = fetch_offset - 1
        if prev < self.log.start_index:
            snap = self._snapshot
            if snap is None:
                return None
            return Message(
                _MT.SNAPSHOT,
                self.id,
                replica_id,
                self.term,
                log_term=snap.term,
                index=snap.index,
                commit=self.committed,
                snapshot=snap,
                src_dir=self.directory_id,
                dst_dir=directory_id,
                fetched=True,
            )
        prev_term = self.log.term(prev)
        if prev_term is None or prev > self.committed:
            return None
        hi = min(self.committed, prev + max(max_entries, 1))
        return Message(
            _MT.APPEND,
            self.id,
            replica_id,
            self.term,
            log_term=prev_term,
            index=prev,
            entries=self.log.slice(fetch_offset, hi + 1),
            commit=self.committed,
            src_dir=self.directory_id,
            dst_dir=directory_id,
            fetched=True,
        )

    def observers(self) -> dict[int, ObserverState]:
        """The replicas outside the voter set that fetched from this leader recently."""
        return dict(self._observers)


    def _expire_observers(self) -> None:
        horizon = self._ticks - OBSERVER_EXPIRY_ELECTIONS * self.election_timeout
        for node_id in [n for n, o in self._observers.items() if o.last_fetch_tick < horizon]:
            del self._observers[node_id]
