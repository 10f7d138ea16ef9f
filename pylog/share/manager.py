"""Share sessions and the share partitions of this broker, as one sans-IO component.

A share consumer fetches through a *share session* per (group, member): epoch 0 opens it with a
set of partitions, each later request carries the next epoch and may add partitions or forget
some (the member keeps the records it acquired there until it acknowledges them or their locks
expire), and epoch -1 closes it (everything the member still holds is released). The share
partitions themselves (`partition.SharePartition`) are created on first use from their persisted
state, or at `share.auto.offset.reset` when there is none.

The manager reports which share partitions changed durably (`dirty`), so the shell can append
their snapshots before it answers; the clock is passed in.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from pylog.groups.types import CoordinatorRecord
from pylog.protocol.errors import ErrorCode
from pylog.share.partition import ShareConfig, SharePartition
from pylog.share.state import ShareKey, ShareStateStore

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass
class ShareSession:
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


class ShareManager:
    def __init__(
        self,
        config: ShareConfig,
        store: ShareStateStore,
        config_for: Callable[[str], ShareConfig] | None = None,
    ) -> None:
        self.config = config
        self.config_for = config_for or (lambda group_id: config)  # a group's GROUP config overrides
        self.store = store
        self.partitions: dict[ShareKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.dirty: set[ShareKey] = set()

    # ------------------------------------------------------------------ partitions

    def partition(self, key: ShareKey, initial_offset: Callable[[], int]) -> SharePartition:
        sp = self.partitions.get(key)
        config = self.config_for(key[0])
        if sp is None:
            stored = self.store.get(key)
            if stored is not None:
                sp = SharePartition(config, stored.start_offset, stored.batches)
            else:
                sp = SharePartition(config, initial_offset())
                self.dirty.add(key)  # the start offset is decided once, not again after a restart
            self.partitions[key] = sp
        elif sp.config != config:  # the group's configs changed: new acquisitions follow them
            sp.config = config
        return sp

    def forget_partitions_of(self, state_partition: int) -> None:
        """The state partition moved away: its share partitions are rebuilt on next use."""
        for key in [k for k in self.partitions if self.store.partition_for(k) == state_partition]:
            del self.partitions[key]

    def reset(self, key: ShareKey, start_offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts over at `start_offset`."""
        self.partitions[key] = SharePartition(self.config_for(key[0]), start_offset)
        self.dirty.add(key)

    def delete(self, key: ShareKey) -> CoordinatorRecord:
        """DeleteShareGroupOffsets: forget the share partition (a tombstone for its state)."""
        self.partitions.pop(key, None)
        self.dirty.discard(key)
        return self.store.delete(key)

    def acknowledge(
        self,
        key: ShareKey,
        member_id: str,
        batches: list[tuple[int, int, list[int]]],
        now_ms: int | None = None,
        *,
        renew: bool = False,
    ) -> ErrorCode:
        """Apply a partition's AcknowledgementBatches at `now_ms`: locks that ran out by then are
        released first, as the timer would have done had it run, so a late acknowledgement of
        them is refused (INVALID_RECORD_STATE) and the records go to the next acquisition. RENEW
        needs `renew` (and `now_ms`, when its lock starts again)."""
        sp = self.partitions.get(key)
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE
        if now_ms is not None and sp.expire(now_ms)[0]:
            self.dirty.add(key)
        for first, last, types in batches:
            error = sp.acknowledge(member_id, first, last, types, now_ms if renew else None)
            if error is not ErrorCode.NONE:
                return error
        self.dirty.add(key)
        return ErrorCode.NONE

    def snapshot_records(self) -> list[CoordinatorRecord]:
        """Records persisting every dirty share partition; clears `dirty`."""
        out = []
        for key in sorted(self.dirty, key=str):
            sp = self.partitions.get(key)
            if sp is not None:
                out.append(self.store.write(key, *sp.snapshot()))
        self.dirty.clear()
        return out

    # ------------------------------------------------------------------ sessions

    def session_step(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        add: list[TopicIdPartition],
        forget: list[TopicIdPartition],
    ) -> tuple[ErrorCode, ShareSession | None]:
        """Validate and advance the session for one ShareFetch (its partitions to fetch)."""
        sid = (group_id, member_id)
        session = self.sessions.get(sid)
        if epoch == 0:
            if session is not None:
                self._release(group_id, member_id, list(session.partitions))
            session = self.sessions[sid] = ShareSession(1, dict.fromkeys(add))
            return ErrorCode.NONE, session
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == -1:
            return ErrorCode.NONE, session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch += 1
        for tp in add:
            session.partitions.setdefault(tp, None)
        for tp in forget:
            # Kafka's ShareSession.update: the member keeps what it acquired there, so the
            # acknowledgements it still sends for it (a subscription change) are accepted; the
            # records come back when their locks expire or the member leaves.
            session.partitions.pop(tp, None)
        return ErrorCode.NONE, session

    def check_session(self, group_id: str, member_id: str, epoch: int) -> ErrorCode:
        """ShareAcknowledge: the session must exist and the epoch be the expected one (or -1)."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch == -1:
            return ErrorCode.NONE
        if epoch == 0 or epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        session.epoch += 1
        return ErrorCode.NONE

    def close_session(self, group_id: str, member_id: str) -> None:
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            self._release(group_id, member_id, list(session.partitions))

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member left the group: close its session and release what it holds anywhere."""
        self.sessions.pop((group_id, member_id), None)
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                self.dirty.add(key)

    def _release(self, group_id: str, member_id: str, tps: list[TopicIdPartition]) -> None:
        for t, p in tps:
            sp = self.partitions.get((group_id, t, p))
            if sp is not None and sp.release_member(member_id):
                self.dirty.add((group_id, t, p))

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        return min(
            (d for sp in self.partitions.values() if (d := sp.next_deadline_ms()) is not None), default=None
        )

    def tick(self, now_ms: int) -> bool:
        """Expire acquisition locks; True if any record became available again."""
        released_any = False
        for key, sp in self.partitions.items():
            released, _archived = sp.expire(now_ms)
            released_any |= released
            if released:
                self.dirty.add(key)
        return released_any
