"""A deterministic, sans-IO Raft core (in the style of etcd-io/raft) for the metadata quorum.

Theory of operation
-------------------
A ``RaftNode`` is a pure state machine. The shell feeds it time (``tick()``, one call
per logical tick), peers' messages (``step(message)``) and proposals
(``propose(data)``); the node never does I/O. After feeding it, the shell drains
``ready()``: persist the hard state (term, vote, commit) and new entries, *then* send
the messages, then apply the committed entries, then ``advance(ready)``. Persisting
before sending is what makes a vote or an acknowledgement durable before anyone can
count it; a leader counts its own copy of an entry only when ``advance`` reports it
persisted, so a quorum of one commits right after its local write.

Roles: every node starts as a follower. A follower that hears nothing from a leader
for a randomised election timeout (``[election_timeout, 2*election_timeout)`` ticks,
drawn from the injected ``random.Random``) becomes a *pre-candidate* and asks the
voters whether they would vote for it at term+1 (pre-vote, Raft thesis §9.6) without
touching anyone's term. Only when a quorum says yes does it become a candidate,
increment its term, vote for itself and request real votes. A node that heard from a
leader within the last election timeout ignores (pre-)vote requests altogether (the
leader lease), so a partitioned node rejoining with a high term cannot depose a
healthy leader. Only the leader's own messages count as hearing from it: committed entries a
voter fetched (``Message.fetched``) name the leader but do not reset the election timer, or a
leader that cannot reach its followers would keep them from electing one that can.

A new leader appends an empty entry of its term: entries of earlier terms are only
ever committed indirectly, by counting replicas of an entry of the current term
(Raft §5.4.2). Replication tracks each follower in a ``Progress`` (probe / replicate);
a rejected APPEND carries a hint (the follower's last index with a term <= the probed
one) so back-off skips whole terms. Followers learn the commit index from APPENDs
and heartbeats. With check-quorum, a leader that has not heard from a quorum within
an election timeout steps down.

Snapshots (log compaction): the application captures its state machine as of an
applied index and hands it to ``compact(index, data)``; the node keeps that
``Snapshot``, drops the entries it covers and reports it in ``Ready.snapshot_taken``
so the storage writes it and deletes the log prefix. A leader whose follower needs
an entry it no longer has sends its snapshot (SNAPSHOT) instead of an APPEND; the
follower's ``Progress`` pauses (snapshot state) until an APPEND_RESP acknowledges
it, or until an election timeout passes without one, when the leader probes again.
A follower receiving a snapshot beyond its commit index either finds the
snapshot's last entry in its own log (it then only moves its commit index) or
discards its log, which now starts after the snapshot, sets its commit index to
the snapshot's and reports it in ``Ready.snapshot``: the shell persists it and
replaces its state machine with the snapshot's data before applying the committed
entries that follow. A snapshot at or below the commit index is stale and is
answered with the commit index, which moves the leader on. After a restart the
node starts from the storage's snapshot and the entries after it, with
``applied`` = the snapshot's index: the shell restores the snapshot first.

Membership (KIP-853) and observers: see ``raft_membership.py``.

Left for later: leadership transfer on demand and read-index.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable

from pylog.cluster.progress import Progress, ProgressState
from pylog.cluster.raft_log import LogInvariantError, RaftLog
from pylog.cluster.raft_membership import Membership, ObserverState, VoterChangeRefused
from pylog.cluster.raft_types import (
    Entry,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    NotLeader,
    RaftStorage,
    Ready,
    Role,
    Snapshot,
)
from pylog.cluster.voters import KRAFT_VERSION_DYNAMIC, VoterHistory, VoterSet, is_control

__all__ = [
    "Entry", "HardState", "LogInvariantError", "MemoryStorage", "Message", "MessageType", "NotLeader",
    "ObserverState", "RaftNode", "RaftStorage", "Ready", "Role", "Snapshot", "VoterChangeRefused",
]

_MT = MessageType
_FROM_LEADER = (_MT.APPEND, _MT.HEARTBEAT, _MT.SNAPSHOT)


class RaftNode(Membership):
    def __init__(
        self,
        node_id: int,
        voters: Iterable[int] | VoterSet | None,
        storage: RaftStorage,
        rng: random.Random,
        election_timeout_ticks: int = 10,
        heartbeat_ticks: int = 1,
        *,
        applied: int | None = None,
        max_entries_per_message: int = 64,
        max_inflight: int = 64,
        directory_id: uuid.UUID | None = None,
    ) -> None:
        """``voters``: the static voter set (kraft.version 0), or None when the voters come from
        the log and snapshots only (a node with neither is an observer until it learns them)."""
        if heartbeat_ticks <= 0 or election_timeout_ticks <= heartbeat_ticks:
            raise ValueError("need 0 < heartbeat_ticks < election_timeout_ticks")
        self.id = node_id
        self.directory_id = directory_id
        if voters is None or isinstance(voters, VoterSet):
            self._static = voters
        else:
            ids = list(voters)
            if not ids:
                raise ValueError("voters must not be empty")
            self._static = VoterSet.of_ids(ids)
        self._rng = rng
        self.election_timeout = election_timeout_ticks
        self.heartbeat_timeout = heartbeat_ticks
        self._max_entries = max_entries_per_message
        self._max_inflight = max_inflight

        hs = storage.hard_state()
        # The latest snapshot: sent to followers that need entries before our log start.
        self._snapshot: Snapshot | None = storage.snapshot()
        snap_index = self._snapshot.index if self._snapshot is not None else 0
        snap_term = self._snapshot.term if self._snapshot is not None else 0
        self.log = RaftLog(storage.entries(), snap_index, snap_term)
        self._history = VoterHistory(self._base_state(self._snapshot))
        self._scan_control(snap_index + 1)
        self.term = max(hs.term, snap_term)
        self.vote = hs.vote if hs.term == self.term else None
        self.committed = max(min(hs.commit, self.log.last_index()), snap_index)
        if applied is not None and applied < snap_index:
            raise ValueError(f"applied {applied} is behind the snapshot at {snap_index}: restore it first")
        self.applied = snap_index if applied is None else applied
        self._snapshot_received: Snapshot | None = None  # restored, not yet in a Ready
        self._snapshot_taken: Snapshot | None = None  # compacted, not yet in a Ready
        self._stable = self.log.last_index()  # highest index known to be persisted
        self._prev_hard_state = hs

        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        self._msgs: list[Message] = []
        self._votes: dict[int, bool] = {}
        self._progress: dict[int, Progress] = {}
        self._observers: dict[int, ObserverState] = {}
        self._leader_start = 0  # index of the no-op that opened our term as leader
        self._ticks = 0
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_timeout = self.election_timeout
        self._reset_randomized_timeout()

    # ------------------------------------------------------------------ inputs

    def tick(self) -> None:
        """Advance logical time by one tick."""
        self._ticks += 1
        if self.role is Role.LEADER:
            self._tick_leader()
        else:
            self._election_elapsed += 1
            if self.is_voter and self._election_elapsed >= self._randomized_timeout:
                self._election_elapsed = 0
                self.campaign()

    def campaign(self) -> None:
        """Start a (pre-)election now, as on an election timeout (no-op on a leader or an observer)."""
        if self.role is Role.LEADER or not self.is_voter:
            return
        self._election_elapsed = 0
        self._campaign(pre_vote=True)

    def propose(self, data: bytes) -> int | NotLeader:
        """Append ``data`` as a new entry; returns its index, or NotLeader with a hint."""
        if not data:
            raise ValueError("empty entries are reserved for the leader's no-op")
        if is_control(data):
            raise ValueError("control entries are appended by the voter changes, not proposed")
        if self.role is not Role.LEADER:
            return NotLeader(self.leader_id, self.term)
        entry = Entry(self.term, self.log.last_index() + 1, bytes(data))
        self.log.append(entry)
        self._bcast_append()
        return entry.index

    def compact(self, index: int, data: bytes) -> Snapshot:
        """The application captured its state machine as of ``index`` (<= applied) in ``data``.

        The entries up to ``index`` are dropped; the snapshot is what followers behind
        the log start are sent, and the next Ready carries it as ``snapshot_taken``.
        """
        if index > self.applied:
            raise ValueError(f"cannot snapshot at {index}: only {self.applied} is applied")
        if index <= self.log.start_index:
            raise ValueError(f"a snapshot at {index} is not newer than the one at {self.log.start_index}")
        term = self.log.compact(index)
        state = self._history.at(index)
        dynamic = state.kraft_version >= KRAFT_VERSION_DYNAMIC
        snap = Snapshot(
            index, term, bytes(data), state.voters if dynamic else None, state.kraft_version if dynamic else 0
        )
        self._history.compact(index)
        self._snapshot = self._snapshot_taken = snap
        return snap

    def step(self, m: Message) -> None:
        """Handle a message from a peer."""
        if m.dst != self.id:
            raise ValueError(f"message for {m.dst} stepped into node {self.id}")
        if m.dst_dir is not None and self.directory_id is not None and m.dst_dir != self.directory_id:
            return  # meant for this node id on another disk (KIP-853's INVALID_VOTER_KEY)
        static = self._static if self.kraft_version < KRAFT_VERSION_DYNAMIC else None
        if static is not None and m.src not in static:
            return  # static membership: strangers get no votes and no say
        if m.term > self.term:
            if m.type in (_MT.VOTE, _MT.PRE_VOTE) and self._in_lease():
                return
            if m.type is _MT.PRE_VOTE or (m.type is _MT.PRE_VOTE_RESP and not m.reject):
                pass  # a pre-vote never changes anyone's term
            elif m.type in _FROM_LEADER:
                self._become_follower(m.term, None if self._pulled(m) else m.src)
            else:
                self._become_follower(m.term, None)
        elif m.term < self.term:
            if m.type in _FROM_LEADER:
                # A stale leader (e.g. back from a partition) learns the new term and steps down.
                self._send(_MT.APPEND_RESP, m.src)
            elif m.type is _MT.PRE_VOTE:
                self._send(_MT.PRE_VOTE_RESP, m.src, reject=True)
            return

        if m.type in (_MT.VOTE, _MT.PRE_VOTE):
            self._handle_vote_request(m)
        elif self.role is Role.LEADER:
            self._step_leader(m)
        elif self._pulled(m):
            self._take_fetched(m)
        elif self.role in (Role.CANDIDATE, Role.PRE_CANDIDATE):
            self._step_candidate(m)
        else:
            self._step_follower(m)

    # ------------------------------------------------------------------ output

    def has_ready(self) -> bool:
        prev = self._prev_hard_state
        return bool(
            self._msgs
            or self._snapshot_received is not None
            or self._snapshot_taken is not None
            or self.log.last_index() > self._stable
            or self.committed > self.applied
            or self.term != prev.term
            or self.vote != prev.vote
            or self.committed != prev.commit
        )

    def ready(self) -> Ready:
        """What the shell must do now (see ``Ready``); drains the outgoing messages."""
        hs = self._hard_state()
        msgs, self._msgs = tuple(self._msgs), []
        if self.applied < self.log.start_index and self._snapshot_received is None:
            raise LogInvariantError(f"applied {self.applied} is behind the log start {self.log.start_index}")
        return Ready(
            hard_state=hs if hs != self._prev_hard_state else None,
            entries=self.log.slice(self._stable + 1, self.log.last_index() + 1),
            committed_entries=self.log.slice(self.applied + 1, self.committed + 1),
            messages=msgs,
            role=self.role,
            leader_id=self.leader_id,
            term=self.term,
            snapshot=self._snapshot_received,
            snapshot_taken=self._snapshot_taken,
        )

    def advance(self, rd: Ready) -> None:
        """The shell persisted, sent and applied everything in ``rd``."""
        if rd.hard_state is not None:
            self._prev_hard_state = rd.hard_state
        if rd.snapshot is not None:
            self.applied = max(self.applied, rd.snapshot.index)
            if self._snapshot_received is rd.snapshot:
                self._snapshot_received = None
        if rd.snapshot_taken is not None and self._snapshot_taken is rd.snapshot_taken:
            self._snapshot_taken = None
        if rd.entries:
            last = rd.entries[-1]
            # Skip if the log was rewritten since the Ready was made: the next Ready repeats it.
            if self.log.match_term(last.index, last.term):
                self._stable = max(self._stable, last.index)
        if rd.committed_entries:
            self.applied = max(self.applied, rd.committed_entries[-1].index)
        leader = self.role is Role.LEADER
        if leader and self._progress[self.id].maybe_update(self._stable) and self._maybe_commit():
            self._after_commit()
            if self.role is Role.LEADER:
                self._bcast_append()

    # ------------------------------------------------------------------ status

    @property
    def last_index(self) -> int:
        return self.log.last_index()

    @property
    def stable_index(self) -> int:
        return self._stable

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot (taken, received or loaded); the log starts after it."""
        return self._snapshot

    def progress(self, node_id: int) -> Progress | None:
        return self._progress.get(node_id)

    # ------------------------------------------------------------------ roles

    def _hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.committed)

    def _reset_randomized_timeout(self) -> None:
        self._randomized_timeout = self._rng.randrange(self.election_timeout, 2 * self.election_timeout)

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = None
        self.leader_id = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._reset_randomized_timeout()
        self._votes = {}
        self._progress = {}
        self._observers = {}
        self._leader_start = 0

    def _become_follower(self, term: int, leader: int | None) -> None:
        self._reset(term)
        self.leader_id = leader
        self.role = Role.FOLLOWER

    def _become_pre_candidate(self) -> None:
        # No term or vote change: that is the point of pre-vote.
        self._votes = {}
        self.leader_id = None
        self._progress = {}
        self._reset_randomized_timeout()
        self.role = Role.PRE_CANDIDATE

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.vote = self.id
        self.role = Role.CANDIDATE

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.leader_id = self.id
        self.role = Role.LEADER
        last = self.log.last_index()
        self._progress[self.id] = Progress(last + 1, self._max_inflight)
        self._sync_progress()
        me = self._progress[self.id]
        me.maybe_update(self._stable)
        me.become_replicate()
        me.recent_active = True
        self.log.append(Entry(self.term, last + 1, b""))
        self._leader_start = last + 1

    def _sync_progress(self) -> None:
        """Track every replica the leader replicates to: the voters, and those of the last
        committed set that a pending change removes (so they learn of it)."""
        keep: dict[int, uuid.UUID | None] = {}
        for vs in (self.committed_voter_set, self.voter_set):
            if vs is not None:
                keep.update((v.node_id, v.directory_id) for v in vs.voters)
        for node_id in list(self._progress):
            if node_id != self.id and node_id not in keep:
                del self._progress[node_id]
        nxt = self.log.last_index() + 1
        for node_id in keep:
            if node_id not in self._progress:
                self._progress[node_id] = Progress(nxt, self._max_inflight)
            self._observers.pop(node_id, None)

    def _in_lease(self) -> bool:
        return self.leader_id is not None and self._election_elapsed < self.election_timeout

    # ------------------------------------------------------------------ elections

    def _campaign(self, pre_vote: bool) -> None:
        if pre_vote:
            self._become_pre_candidate()
            kind, term = _MT.PRE_VOTE, self.term + 1
        else:
            self._become_candidate()
            kind, term = _MT.VOTE, self.term
        if self._poll(self.id, self.directory_id, True) is True:
            self._won_election(pre_vote)
            return
        last_index, last_term = self.log.last_index(), self.log.last_term()
        for v in self.voters:
            if v != self.id:
                self._send(kind, v, term=term, log_term=last_term, index=last_index)

    def _won_election(self, pre_vote: bool) -> None:
        if pre_vote:
            self._campaign(pre_vote=False)
        else:
            self._become_leader()
            self._bcast_append()

    def _poll(self, voter: int, directory_id: uuid.UUID | None, granted: bool) -> bool | None:
        """Record a vote; True when won, False when lost, None while undecided."""
        vs = self.voter_set
        if vs is None or not vs.is_voter(voter, directory_id):
            return None  # not a voter of ours: its answer does not count
        self._votes.setdefault(voter, granted)
        yes = sum(1 for g in self._votes.values() if g)
        if yes >= vs.quorum:
            return True
        if len(self._votes) - yes > len(vs) - vs.quorum:
            return False
        return None

    def _handle_vote_request(self, m: Message) -> None:
        resp = _MT.PRE_VOTE_RESP if m.type is _MT.PRE_VOTE else _MT.VOTE_RESP
        can_vote = (
            self.vote == m.src
            or (self.vote is None and self.leader_id is None)
            or (m.type is _MT.PRE_VOTE and m.term > self.term)
        )
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            self._send(resp, m.src, term=m.term, dst_dir=m.src_dir)
            if m.type is _MT.VOTE:
                self._election_elapsed = 0
                self.vote = m.src
        else:
            self._send(resp, m.src, reject=True, dst_dir=m.src_dir)

    def _pulled(self, m: Message) -> bool:
        """A fetched answer reaching a voter (see ``Message.fetched``)."""
        return m.fetched and self.is_voter

    def _take_fetched(self, m: Message) -> None:
        """Entries and the commit index; a follower learns who leads, but its election timer runs on."""
        if self.role is Role.FOLLOWER:
            self.leader_id = m.src
        if m.type is _MT.APPEND:
            self._handle_append(m)
        elif m.type is _MT.SNAPSHOT:
            self._handle_snapshot(m)

    def _step_candidate(self, m: Message) -> None:
        pre_vote = self.role is Role.PRE_CANDIDATE
        if m.type is _MT.APPEND:
            self._become_follower(m.term, m.src)
            self._handle_append(m)
        elif m.type is _MT.HEARTBEAT:
            self._become_follower(m.term, m.src)
            self._handle_heartbeat(m)
        elif m.type is _MT.SNAPSHOT:
            self._become_follower(m.term, m.src)
            self._handle_snapshot(m)
        elif m.type is (_MT.PRE_VOTE_RESP if pre_vote else _MT.VOTE_RESP):
            if pre_vote and not m.reject and m.term != self.term + 1:
                return  # a grant from an earlier pre-campaign
            result = self._poll(m.src, m.src_dir, not m.reject)
            if result is True:
                self._won_election(pre_vote)
            elif result is False:
                self._become_follower(self.term, None)

    # ------------------------------------------------------------------ followers

    def _step_follower(self, m: Message) -> None:
        if m.type is _MT.APPEND:
            self._election_elapsed = 0
            self.leader_id = m.src
            self._handle_append(m)
        elif m.type is _MT.HEARTBEAT:
            self._election_elapsed = 0
            self.leader_id = m.src
            self._handle_heartbeat(m)
        elif m.type is _MT.SNAPSHOT:
            self._election_elapsed = 0
            self.leader_id = m.src
            self._handle_snapshot(m)
        elif m.type is _MT.END_QUORUM_EPOCH and self.leader_id in (m.src, None):
            self.leader_id = None  # the lease ends: the successor's (pre-)votes are granted
            if m.index == 0:
                self.campaign()

    def _handle_append(self, m: Message) -> None:
        if m.index < self.committed:
            self._send(_MT.APPEND_RESP, m.src, index=self.committed)
            return
        old_last = self.log.last_index()
        result = self.log.maybe_append(m.index, m.log_term, m.entries, self.committed)
        if result is None:
            hint_index, hint_term = self.log.find_conflict_by_term(
                min(m.index, self.log.last_index()), m.log_term
            )
            self._send(
                _MT.APPEND_RESP, m.src, index=m.index, reject=True, reject_hint=hint_index, log_term=hint_term
            )
            return
        last_new, replaced_from = result
        if replaced_from:
            self._stable = min(self._stable, replaced_from - 1)
            self._history.truncate_from(replaced_from)
            old_last = replaced_from - 1
        if self.log.last_index() > old_last:
            self._scan_control(old_last + 1)
        self._commit_to(min(m.commit, last_new))
        self._send(_MT.APPEND_RESP, m.src, index=last_new)

    def _handle_heartbeat(self, m: Message) -> None:
        self._commit_to(m.commit)
        self._send(_MT.HEARTBEAT_RESP, m.src)

    def _handle_snapshot(self, m: Message) -> None:
        # Answered like an APPEND: our last index once restored, else our commit index
        # (a stale snapshot: what we have committed matches the leader's log).
        if m.snapshot is not None and self._restore(m.snapshot):
            self._send(_MT.APPEND_RESP, m.src, index=self.log.last_index())
        else:
            self._send(_MT.APPEND_RESP, m.src, index=self.committed)

    def _restore(self, snap: Snapshot) -> bool:
        """Start over from the leader's snapshot; False if it is stale or our log holds it."""
        if snap.index <= self.committed:
            return False
        if self.log.match_term(snap.index, snap.term):
            self._commit_to(snap.index)  # our own entries get applied as usual
            return False
        self.log.restore(snap.index, snap.term)
        self._history.reset(self._base_state(snap))
        self._snapshot = self._snapshot_received = snap
        self._snapshot_taken = None  # older than this one, and its entries are gone
        self.committed = snap.index
        self._stable = snap.index
        return True

    def _commit_to(self, index: int) -> None:
        if index > self.committed:
            if index > self.log.last_index():
                raise LogInvariantError(f"commit {index} beyond last index {self.log.last_index()}")
            self.committed = index

    # ------------------------------------------------------------------ leaders

    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= self.election_timeout:
            self._election_elapsed = 0
            self._expire_observers()
            if not self._check_quorum():
                self._become_follower(self.term, None)
                return
        for v, pr in self._progress.items():
            if pr.state is ProgressState.SNAPSHOT:
                pr.snapshot_elapsed += 1
                if pr.snapshot_elapsed >= self.election_timeout:  # lost, or never answered
                    pr.become_probe()
                    self._send_append(v)
        if self._heartbeat_elapsed >= self.heartbeat_timeout:
            self._heartbeat_elapsed = 0
            for v, pr in self._progress.items():
                if v != self.id:
                    self._send(_MT.HEARTBEAT, v, commit=min(pr.match, self.committed))

    def _check_quorum(self) -> bool:
        vs = self.voter_set
        active = 0
        for v, pr in self._progress.items():
            if vs is not None and v in vs and (v == self.id or pr.recent_active):
                active += 1
            pr.recent_active = v == self.id
        return active >= self.quorum

    def _step_leader(self, m: Message) -> None:
        pr = self._progress.get(m.src)
        if pr is None or not self._member(m.src, m.src_dir):
            return
        if m.type is _MT.APPEND_RESP:
            pr.recent_active = True
            if m.reject:
                hint = m.reject_hint
                if m.log_term > 0:
                    hint, _ = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
                if pr.maybe_decrease_to(m.index, hint):
                    if pr.state is ProgressState.REPLICATE:
                        pr.become_probe()
                    self._send_append(m.src)
                return
            was_paused = pr.is_paused()
            if pr.maybe_update(m.index):
                if pr.state is ProgressState.PROBE:
                    pr.become_replicate()
                elif pr.state is ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
                    # The snapshot arrived (or was not needed after all).
                    if pr.match >= self.log.start_index:
                        pr.become_replicate()
                    else:  # we compacted further meanwhile: the next probe sends the newer one
                        pr.become_probe()
                if self._maybe_commit():
                    self._after_commit()
                    if self.role is not Role.LEADER:
                        return
                    self._bcast_append()
                elif was_paused:
                    self._send_append(m.src)
                while m.src in self._progress and self._send_append(m.src, send_if_empty=False):
                    pass
        elif m.type is _MT.HEARTBEAT_RESP:
            pr.recent_active = True
            pr.probe_sent = False
            if pr.state is ProgressState.REPLICATE and pr.is_paused():
                pr.free_one_inflight()
            if pr.match < self.log.last_index():
                self._send_append(m.src)

    def _maybe_commit(self) -> bool:
        vs = self.voter_set
        if vs is None:
            return False
        counted = [v.node_id for v in vs.voters if v.node_id != self.id or self.is_voter]
        matches = sorted((self._progress[v].match for v in counted if v in self._progress), reverse=True)
        matches += [0] * (len(vs) - len(matches))
        candidate = matches[vs.quorum - 1]
        # Only an entry of the current term is committed by counting (Raft §5.4.2).
        if candidate > self.committed and self.log.term(candidate) == self.term:
            self.committed = candidate
            return True
        return False

    def _after_commit(self) -> None:
        """The commit index moved: replicas a committed change removed are dropped, and a leader
        the committed set no longer holds resigns."""
        if self.voter_change_pending:
            return
        self._sync_progress()
        if not self.is_voter:
            self._resign()

    def _resign(self) -> None:
        """Leave leadership to the remaining voters, the most caught-up first (EndQuorumEpoch)."""
        vs = self.voter_set
        successors = sorted(
            (v for v in (vs.ids if vs is not None else ()) if v != self.id and v in self._progress),
            key=lambda v: -self._progress[v].match,
        )
        self._bcast_append()  # they learn the commit index first
        for rank, v in enumerate(successors):
            self._send(_MT.END_QUORUM_EPOCH, v, index=rank, commit=self.committed)
        self._become_follower(self.term, None)

    def _bcast_append(self) -> None:
        for v in list(self._progress):
            if v != self.id:
                self._send_append(v)

    def _send_append(self, to: int, send_if_empty: bool = True) -> bool:
        pr = self._progress[to]
        if pr.is_paused():
            return False
        prev_index = pr.next - 1
        prev_term = self.log.term(prev_index)
        if prev_term is None:
            if prev_index < self.log.start_index:
                return self._send_snapshot(to, pr)
            return False
        entries = self.log.slice(pr.next, pr.next + self._max_entries)
        if not entries and not send_if_empty:
            return False
        self._send(
            _MT.APPEND, to, log_term=prev_term, index=prev_index, entries=entries, commit=self.committed
        )
        pr.sent(entries[-1].index if entries else 0)
        return True

    def _send_snapshot(self, to: int, pr: Progress) -> bool:
        """The follower needs entries we compacted: send our snapshot instead."""
        snap = self._snapshot
        if not pr.recent_active or snap is None:
            return False  # not while it does not answer: a snapshot is large
        self._send(
            _MT.SNAPSHOT, to, log_term=snap.term, index=snap.index, commit=self.committed, snapshot=snap
        )
        pr.become_snapshot(snap.index)
        return True

    def _send(self, kind: MessageType, to: int, **fields: object) -> None:
        fields.setdefault("term", self.term)
        fields.setdefault("dst_dir", self._dir_of(to))
        self._msgs.append(Message(kind, self.id, to, src_dir=self.directory_id, **fields))  # type: ignore[arg-type]
