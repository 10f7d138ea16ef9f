"""Value types shared by the Raft core and its shells.

Indexes are 1-based; index 0 is the empty-log sentinel (term 0). The metadata log's
offsets are these indexes. A term is the Kafka leader epoch of the metadata log.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pylog.cluster.voters import VoterSet


class Role(enum.Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class MessageType(enum.Enum):
    PRE_VOTE = "pre-vote"
    PRE_VOTE_RESP = "pre-vote-resp"
    VOTE = "vote"
    VOTE_RESP = "vote-resp"
    APPEND = "append"
    APPEND_RESP = "append-resp"
    HEARTBEAT = "heartbeat"
    HEARTBEAT_RESP = "heartbeat-resp"
    SNAPSHOT = "snapshot"
    END_QUORUM_EPOCH = "end-quorum-epoch"


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. Empty ``data`` is the no-op a new leader appends to commit its term."""

    term: int
    index: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The application's state machine as of entry ``index`` (of term ``term``).

    ``data`` is opaque to Raft: the shell captures it and restores from it. The log
    of a node holding a snapshot starts at ``index + 1``. ``voters`` / ``kraft_version``
    are the quorum's as of ``index`` when they live in the log (kraft.version 1; Kafka's
    snapshot header control records), else None / 0.
    """

    index: int
    term: int
    data: bytes
    voters: VoterSet | None = None
    kraft_version: int = 0

    def __repr__(self) -> str:
        voters = "" if self.voters is None else f", voters={self.voters}"
        return f"Snapshot(index={self.index}, term={self.term}, data=<{len(self.data)} bytes>{voters})"


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be on disk before any message of the same Ready leaves the node."""

    term: int = 0
    vote: int | None = None
    commit: int = 0


@dataclass(frozen=True, slots=True)
class Message:
    """A Raft RPC.

    APPEND: ``index``/``log_term`` describe the entry preceding ``entries``.
    APPEND_RESP: accepted -> ``index`` is the follower's last matching index;
    rejected -> ``index`` is the rejected probe index and ``reject_hint``/``log_term``
    say where the follower's log could match (for conflict back-off by term).
    VOTE/PRE_VOTE: ``index``/``log_term`` describe the candidate's last entry.
    SNAPSHOT: ``snapshot`` is the leader's latest snapshot (``index``/``log_term`` are
    its index and term); it is answered with an APPEND_RESP.
    END_QUORUM_EPOCH: the leader resigns (it left the voter set); ``index`` is the
    receiver's rank among the preferred successors (0 campaigns at once).
    ``src_dir`` / ``dst_dir``: the directory ids of sender and intended receiver (KIP-853's
    replica keys); a message for another directory id of the receiver's node id is dropped.
    ``fetched``: the leader's answer to a fetch of committed entries (``observer_fetch``), not a
    message the leader pushed. It brings entries, the commit index and who leads, but it is no
    sign that the leader reaches this node, so a voter does not delay its election timeout for it.
    """

    type: MessageType
    src: int
    dst: int
    term: int
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: Snapshot | None = None
    src_dir: uuid.UUID | None = None
    dst_dir: uuid.UUID | None = None
    fetched: bool = False


@dataclass(frozen=True, slots=True)
class NotLeader:
    """Returned by ``propose`` on a non-leader; ``leader_hint`` is the known leader or None."""

    leader_hint: int | None
    term: int


@dataclass(frozen=True, slots=True)
class Ready:
    """Work for the shell, to be done in this order, then ``RaftNode.advance(ready)``:

    1. persist, in this order: ``snapshot`` (a snapshot received from the leader: the
       log is discarded and starts after it), ``entries`` (persisted entries with an
       index >= ``entries[0].index`` are replaced: a follower truncating a conflict),
       ``hard_state`` (if not None), ``snapshot_taken`` (the application's own
       ``compact``: write it, then drop the log entries it covers);
    2. send ``messages``;
    3. if ``snapshot`` is set, replace the state machine with ``snapshot.data``;
    4. apply ``committed_entries`` in order (skipping those with empty data); they
       follow ``snapshot.index`` when a snapshot was restored.
    """

    hard_state: HardState | None
    entries: tuple[Entry, ...]
    committed_entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    role: Role
    leader_id: int | None
    term: int = field(default=0)
    snapshot: Snapshot | None = None
    snapshot_taken: Snapshot | None = None


class RaftStorage(Protocol):
    """What a node reads once, at construction: the persisted state after a restart.

    ``snapshot`` is the latest persisted snapshot (or None); ``entries`` are the log
    entries after it, contiguous from ``snapshot.index + 1`` (from 1 without one).
    """

    def hard_state(self) -> HardState: ...

    def entries(self) -> Sequence[Entry]: ...

    def snapshot(self) -> Snapshot | None: ...


class MemoryStorage:
    """In-memory storage, used by tests and as the template of a durable one."""

    def __init__(
        self,
        entries: Sequence[Entry] = (),
        hard_state: HardState | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        """Optionally start from a persisted ``snapshot``, ``entries`` after it and ``hard_state``."""
        self._hard_state = hard_state if hard_state is not None else HardState()
        self._snapshot = snapshot
        self._entries: list[Entry] = list(entries)
        first = self.first_index()
        if any(e.index != first + i for i, e in enumerate(self._entries)):
            raise ValueError(f"entries must be contiguous from {first}")

    def hard_state(self) -> HardState:
        return self._hard_state

    def entries(self) -> Sequence[Entry]:
        return list(self._entries)

    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def save(self, ready: Ready) -> None:
        """Persist a Ready: received snapshot, entries, hard state, taken snapshot (``Ready``'s order)."""
        if ready.snapshot is not None:
            self.install_snapshot(ready.snapshot, keep_suffix=False)
        if ready.entries:
            first = ready.entries[0].index
            keep = first - self.first_index()
            if keep < 0 or keep > len(self._entries):
                raise ValueError(f"entries start at {first}, storage ends at {self.last_index()}")
            del self._entries[keep:]
            self._entries.extend(ready.entries)
        if ready.hard_state is not None:
            self._hard_state = ready.hard_state
        if ready.snapshot_taken is not None:
            self.install_snapshot(ready.snapshot_taken)

    def install_snapshot(self, snap: Snapshot, *, keep_suffix: bool = True) -> None:
        """Keep ``snap``, and the entries after it if ``keep_suffix`` and the log holds its last entry.

        A snapshot received from the leader (``Ready.snapshot``) replaces the whole log.
        """
        if self._snapshot is not None and snap.index <= self._snapshot.index:
            raise ValueError(f"snapshot at {snap.index} is not newer than the one at {self._snapshot.index}")
        pos = snap.index - self.first_index()
        if keep_suffix and 0 <= pos < len(self._entries) and self._entries[pos].term == snap.term:
            del self._entries[: pos + 1]
        else:
            self._entries.clear()
        self._snapshot = snap

    def first_index(self) -> int:
        return 1 if self._snapshot is None else self._snapshot.index + 1

    def last_index(self) -> int:
        return self.first_index() + len(self._entries) - 1
