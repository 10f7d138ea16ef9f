"""The machinery under the classic membership APIs: the group registry, partition ownership, the
timers (session expiry, rebalance and sync timeouts, the initial rebalance delay) and the rebalance
steps they and the APIs share. `membership` holds the theory of operation and the APIs themselves.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Mapping

from pylog.groups.group import ClassicGroup, GroupState, Member
from pylog.groups.records import encode_group_value, group_metadata_key, partition_for
from pylog.groups.timers import TimerKind, TimerQueue
from pylog.groups.types import (
    CoordinatorRecord,
    GroupConfig,
    JoinGroupResult,
    Output,
    SyncGroupResult,
)
from pylog.protocol.errors import ErrorCode

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY


class GroupRebalancing:
    """Group registry, partition ownership, timers and the rebalance steps."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        rng: random.Random,
        owned_partitions: Iterable[int] | None = None,
    ) -> None:
        self.config = config or GroupConfig()
        self._rng = rng
        self._groups: dict[str, ClassicGroup] = {}
        self._timers = TimerQueue()
        self._owned: set[int] | None = None if owned_partitions is None else set(owned_partitions)
        self._loading: set[int] = set()

    # ------------------------------------------------------------------ ownership

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding `group_id`."""
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def _coordinator_error(self, group_id: str) -> ErrorCode:
        p = self.partition_for(group_id)
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self._owned is not None and p not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group object, for inspection (describe / tests); do not mutate it."""
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def _get_or_create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self._groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, self.partition_for(group_id), state_timestamp_ms=now_ms)
            self._groups[group_id] = group
        return group

    def _store_group(
        self, group: ClassicGroup, out: Output, assignment: Mapping[str, bytes] | None = None
    ) -> None:
        value = encode_group_value(group.metadata_value(assignment))
        out.records.append(CoordinatorRecord(group.partition, group_metadata_key(group.group_id), value))

    def _new_member_id(self, group: ClassicGroup, prefix: str) -> str:
        while True:
            mid = f"{prefix}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"
            if mid not in group.members and mid not in group.pending_members:
                return mid

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        """When the shell must call `tick` next (None: nothing scheduled)."""
        while (t := self._timers.peek()) is not None and not self._timer_live(
            t.seq, t.kind, t.group_id, t.member_id
        ):
            self._timers.pop()
        return t.deadline_ms if t is not None else None

    def tick(self, now_ms: int) -> Output:
        """Fire the timers due at `now_ms` (session expiry, rebalance / sync timeouts)."""
        out = Output()
        self._run_timers(now_ms, out)
        return out

    def _timer_live(self, seq: int, kind: TimerKind, group_id: str, member_id: str) -> bool:
        group = self._groups.get(group_id)
        if group is None:
            return False
        if kind is TimerKind.HEARTBEAT:
            m = group.members.get(member_id)
            return m is not None and m.heartbeat_timer == seq
        if kind is TimerKind.PENDING_MEMBER:
            return group.pending_members.get(member_id) == seq
        if kind is TimerKind.JOIN:
            return group.join_timer == seq
        return group.sync_timer == seq

    def _run_timers(self, now_ms: int, out: Output) -> None:
        while (t := self._timers.peek()) is not None and t.deadline_ms <= now_ms:
            self._timers.pop()
            if not self._timer_live(t.seq, t.kind, t.group_id, t.member_id):
                continue
            group = self._groups[t.group_id]
            if t.kind is TimerKind.HEARTBEAT:
                self._on_heartbeat_timer(group, group.members[t.member_id], now_ms, out)
            elif t.kind is TimerKind.PENDING_MEMBER:
                del group.pending_members[t.member_id]
                if group.is_(PREPARING):
                    self._maybe_complete_join(group, now_ms, out)
            elif t.kind is TimerKind.JOIN:
                group.join_timer = None
                self._on_join_timer(group, t.deadline_ms, now_ms, out)
            else:
                group.sync_timer = None
                self._on_sync_timer(group, now_ms, out)

    def _schedule_heartbeat(self, group: ClassicGroup, m: Member, now_ms: int, timeout_ms: int = -1) -> None:
        m.heartbeat_deadline_ms = now_ms + (m.session_timeout_ms if timeout_ms < 0 else timeout_ms)
        self._arm_heartbeat(group, m)

    def _arm_heartbeat(self, group: ClassicGroup, m: Member) -> None:
        # One live heap entry per member at or before its deadline; a later deadline re-arms on pop.
        assert m.heartbeat_deadline_ms is not None
        if m.heartbeat_timer is None or (m.heartbeat_armed_ms or 0) > m.heartbeat_deadline_ms:
            m.heartbeat_timer = self._timers.push(
                m.heartbeat_deadline_ms, TimerKind.HEARTBEAT, group.group_id, m.member_id
            )
            m.heartbeat_armed_ms = m.heartbeat_deadline_ms

    def _on_heartbeat_timer(self, group: ClassicGroup, m: Member, now_ms: int, out: Output) -> None:
        m.heartbeat_timer = None
        if m.heartbeat_deadline_ms is None:
            return
        if m.heartbeat_deadline_ms > now_ms:
            self._arm_heartbeat(group, m)
        elif m.is_new or not (m.awaiting_join or m.awaiting_sync):
            self._remove_member_and_update(group, m, now_ms, out)
        # else: parked members are kept alive; the session restarts when their request completes.

    def _on_join_timer(self, group: ClassicGroup, deadline_ms: int, now_ms: int, out: Output) -> None:
        if not group.is_(PREPARING):
            return
        if group.in_initial_delay:
            if group.new_member_added and group.initial_delay_remaining_ms > 0:
                group.new_member_added = False
                delay = min(self.config.group_initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
                group.initial_delay_remaining_ms -= delay
                # From the deadline, not from now: a late tick must not stretch the window.
                group.join_timer = self._timers.push(deadline_ms + delay, TimerKind.JOIN, group.group_id)
                return
            group.in_initial_delay = False
        self._complete_join(group, now_ms, out)

    def _on_sync_timer(self, group: ClassicGroup, now_ms: int, out: Output) -> None:
        if group.state not in (COMPLETING, STABLE) or not group.pending_sync:
            return
        for m in [m for m in group.members.values() if m.member_id in group.pending_sync]:
            self._fail_parked(m, ErrorCode.UNKNOWN_MEMBER_ID, out)
            group.remove(m.member_id)
        self._prepare_rebalance(group, now_ms, out)

    # ------------------------------------------------------------------ rebalance steps

    def _fail_parked(self, m: Member, error: ErrorCode, out: Output) -> None:
        if m.join_handle is not None:
            out.complete(m.join_handle, JoinGroupResult(error, member_id=""))
            m.join_handle = None
        if m.sync_handle is not None:
            out.complete(m.sync_handle, SyncGroupResult(error))
            m.sync_handle = None

    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, now_ms: int, out: Output
    ) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms, out)
        else:
            self._maybe_complete_join(group, now_ms, out)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, out: Output) -> None:
        if group.is_(COMPLETING):
            # Parked SyncGroups of the aborted generation must rejoin.
            for m in group.members.values():
                m.assignment = b""
                if m.sync_handle is not None:
                    out.complete(m.sync_handle, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.sync_handle = None
                    self._schedule_heartbeat(group, m, now_ms)
        group.sync_timer = None
        group.pending_sync.clear()
        group.new_member_added = False
        if group.is_(EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            group.in_initial_delay = True
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms - delay, 0)
        else:
            delay = group.rebalance_timeout_ms
            group.in_initial_delay = False
        group.join_timer = self._timers.push(now_ms + delay, TimerKind.JOIN, group.group_id)
        group.transition(PREPARING, now_ms)
        self._maybe_complete_join(group, now_ms, out)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int, out: Output) -> None:
        if group.is_(PREPARING) and not group.in_initial_delay and group.has_all_members_joined():
            self._complete_join(group, now_ms, out)

    def _complete_join(self, group: ClassicGroup, now_ms: int, out: Output) -> None:
        group.join_timer = None
        group.in_initial_delay = False
        for m in list(group.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                self._fail_parked(m, ErrorCode.UNKNOWN_MEMBER_ID, out)
                group.remove(m.member_id)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that have not rejoined are left: wait for them or their expiry.
            group.join_timer = self._timers.push(
                now_ms + max(group.rebalance_timeout_ms, 1), TimerKind.JOIN, group.group_id
            )
            return
        group.init_next_generation(now_ms)
        if group.is_(EMPTY):
            self._store_group(group, out)
            return
        for m in group.members.values():
            if m.join_handle is not None:
                out.complete(m.join_handle, self._join_result(group, m, group.is_leader(m.member_id)))
                m.join_handle = None
            self._schedule_heartbeat(group, m, now_ms)
            m.is_new = False
            group.pending_sync.add(m.member_id)
        group.sync_timer = self._timers.push(
            now_ms + group.rebalance_timeout_ms, TimerKind.SYNC, group.group_id
        )

    @staticmethod
    def _join_result(
        group: ClassicGroup,
        m: Member,
        with_members: bool,
        leader: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResult:
        return JoinGroupResult(
            ErrorCode.NONE,
            member_id=m.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(group.leader_id if leader is None else leader) or "",
            members=group.current_member_metadata() if with_members else (),
            skip_assignment=skip_assignment,
        )

    def _remove_member_and_update(self, group: ClassicGroup, m: Member, now_ms: int, out: Output) -> None:
        self._fail_parked(m, ErrorCode.UNKNOWN_MEMBER_ID, out)
        group.remove(m.member_id)
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms, out)
        elif group.is_(PREPARING):
            self._maybe_complete_join(group, now_ms, out)
