"""Value types shared by the Raft core and its shells.

Indexes are 1-based; index 0 is the empty-log sentinel (term 0). The metadata log's
offsets are these indexes. A term is the Kafka leader epoch of the metadata log.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


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


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. Empty ``data`` is the no-op a new leader appends to commit its term."""

    term: int
    index: int
    data: bytes


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


@dataclass(frozen=True, slots=True)
class NotLeader:
    """Returned by ``propose`` on a non-leader; ``leader_hint`` is the known leader or None."""

    leader_hint: int | None
    term: int


@dataclass(frozen=True, slots=True)
class Ready:
    """Work for the shell, to be done in this order, then ``RaftNode.advance(ready)``:

    1. persist ``hard_state`` (if not None) and ``entries`` — persisted entries with an
       index >= ``entries[0].index`` are replaced (a follower truncating a conflict);
    2. send ``messages``;
    3. apply ``committed_entries`` in order (skipping those with empty data).
    """

    hard_state: HardState | None
    entries: tuple[Entry, ...]
    committed_entries: tuple[Entry, ...]
    messages: tuple[Message, ...]
    role: Role
    leader_id: int | None
    term: int = field(default=0)


class RaftStorage(Protocol):
    """What a node reads once, at construction: the persisted state after a restart.

    ``snapshot`` is the hook for log compaction: the (index, term) of the last entry
    covered by a snapshot; the log then starts after it. Without snapshots it is (0, 0).
    """

    def hard_state(self) -> HardState: ...

    def entries(self) -> Sequence[Entry]: ...

    def snapshot(self) -> tuple[int, int]: ...


class MemoryStorage:
    """In-memory storage, used by tests and as the template of a durable one."""

    def __init__(self, entries: Sequence[Entry] = (), hard_state: HardState | None = None) -> None:
        """Optionally start from persisted ``entries`` (indexes 1..n) and ``hard_state``."""
        self._hard_state = hard_state if hard_state is not None else HardState()
        self._entries: list[Entry] = list(entries)
        self._snapshot = (0, 0)

    def hard_state(self) -> HardState:
        return self._hard_state

    def entries(self) -> Sequence[Entry]:
        return list(self._entries)

    def snapshot(self) -> tuple[int, int]:
        return self._snapshot

    def save(self, ready: Ready) -> None:
        """Persist the ``hard_state`` and ``entries`` of a Ready."""
        if ready.hard_state is not None:
            self._hard_state = ready.hard_state
        if ready.entries:
            first = ready.entries[0].index
            keep = first - self._snapshot[0] - 1
            if keep < 0 or keep > len(self._entries):
                raise ValueError(f"entries start at {first}, storage ends at {self.last_index()}")
            del self._entries[keep:]
            self._entries.extend(ready.entries)

    def last_index(self) -> int:
        return self._snapshot[0] + len(self._entries)
