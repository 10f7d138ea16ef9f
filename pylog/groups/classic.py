"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Theory of operation
-------------------
A group moves through Kafka's classic states::

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable
      ^            ^  |                    |                 |
      +------------|--+ (nobody left)      +-----------------+  (join / leave / expiry)

* PreparingRebalance collects JoinGroups. Each JoinGroup is *parked*: the call records the
  caller's handle on the member and returns nothing for it yet. The phase ends when every known
  member has rejoined (and no MEMBER_ID_REQUIRED member is still expected), or when the rebalance
  timeout (the largest of the members') fires; dynamic members that did not rejoin are then
  removed, static members stay until their session expires. Coming from Empty, the phase first
  waits `group.initial.rebalance.delay.ms`, extended by the same delay while new members keep
  arriving, never beyond the rebalance timeout.
* Completing the phase bumps the generation, picks the protocol all members support with the
  most first-choice votes and keeps the leader if it rejoined (else the first member that did).
  All parked JoinGroups complete at once; only the leader's answer lists the members.
* CompletingRebalance parks SyncGroups until the leader's SyncGroup brings the assignment; then
  the group is Stable, a GroupMetadata record is emitted and every parked SyncGroup completes.
  Members that do not send SyncGroup within the rebalance timeout are removed (a new rebalance).
* Any membership change (a new member, changed metadata, the leader rejoining, a leave, a
  session expiry) sends a Stable or CompletingRebalance group back to PreparingRebalance; members
  learn it from REBALANCE_IN_PROGRESS on Heartbeat / SyncGroup. A follower rejoining a Stable
  group with unchanged metadata just gets the current generation back, and a static member
  (group.instance.id) restarting with unchanged metadata takes over its old member id's place
  and assignment without a rebalance (the old id is fenced with FENCED_INSTANCE_ID).

Pending operations: JoinGroup and SyncGroup take a `handle` (any hashable, unique per request).
Every call returns an `Output`; its `completions` hold `(handle, result)` pairs for whatever
finished during that call — the caller's own request and/or requests parked earlier. A call that
only parks returns no completion for its handle. Time passes only through `now_ms`: each call
first fires the timers due by then, and `tick(now_ms)` does only that; `next_deadline_ms()` says
when the shell must call `tick` next.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pylog.groups.group import ClassicGroup, GroupState, Member
from pylog.groups.records import decode_group_value, encode_group_value, group_metadata_key
from pylog.groups.registry import GroupRegistry
from pylog.groups.timers import Timer, TimerKind
from pylog.groups.types import (
    CoordinatorRecord,
    Handle,
    JoinGroupResult,
    JoinRequest,
    LeaveGroupResult,
    LeaveMemberResult,
    Output,
    SyncGroupResult,
    SyncRequest,
)
from pylog.protocol.errors import ErrorCode

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY


class ClassicProtocol:
    """The classic membership APIs over the classic groups of the registry."""

    def __init__(self, registry: GroupRegistry) -> None:
        self.reg = registry
        self.config = registry.config
        registry.on_timer(TimerKind.HEARTBEAT, self._heartbeat_live, self._on_heartbeat_timer)
        registry.on_timer(TimerKind.PENDING_MEMBER, self._pending_live, self._on_pending_timer)
        registry.on_timer(TimerKind.JOIN, self._join_live, self._on_join_timer)
        registry.on_timer(TimerKind.SYNC, self._sync_live, self._on_sync_timer)

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.reg.get(group_id, ClassicGroup)

    def get_or_create(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self.group(group_id)
        if group is None:
            group = ClassicGroup(group_id, self.reg.partition_for(group_id), state_timestamp_ms=now_ms)
            self.reg.put(group)
        return group

    def store_group(
        self, group: ClassicGroup, out: Output, assignment: Mapping[str, bytes] | None = None
    ) -> None:
        value = encode_group_value(group.metadata_value(assignment))
        out.records.append(CoordinatorRecord(group.partition, group_metadata_key(group.group_id), value))

    def _new_member_id(self, group: ClassicGroup, prefix: str) -> str:
        return self.reg.new_member_id(prefix, group.members.keys() | group.pending_members.keys())

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, req: JoinRequest, *, now_ms: int, handle: Handle) -> Output:
        """JoinGroup (all versions) of a `normalised` request. The answer for `handle` arrives in
        some `Output.completions`."""
        out = Output()
        self.reg.run_timers(now_ms, out)
        group_id, member_id = req.group_id, req.member_id
        error = ErrorCode.NONE
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif (e := self.reg.coordinator_error(group_id)) is not ErrorCode.NONE:
            error = e
        elif not self.config.accepts_session_timeout(req.session_timeout_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        elif member_id and self.group(group_id) is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not ErrorCode.NONE:
            out.complete(handle, JoinGroupResult(error, member_id=member_id))
            return out

        is_new_group = self.group(group_id) is None
        group = self.get_or_create(group_id, now_ms)
        records_before = len(out.records)
        if not self._accept_joining_member(group, member_id):
            if member_id in group.members:
                self._remove_member_and_update(group, group.members[member_id], now_ms, out)
            out.complete(handle, JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif not member_id:
            self._join_new_member(group, req, handle, now_ms, out)
        else:
            self._join_existing_member(group, req, handle, now_ms, out)
        if is_new_group and len(out.records) == records_before:
            self.store_group(group, out)
        self.reg.run_timers(now_ms, out)
        return out

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.is_(PREPARING):
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join) or group.num_awaiting_join() < limit
        if group.state in (COMPLETING, STABLE):
            return member_id in group.members or len(group.members) < limit
        return True

    def _join_new_member(
        self, group: ClassicGroup, req: JoinRequest, handle: Handle, now_ms: int, out: Output
    ) -> None:
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            out.complete(handle, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=""))
            return
        iid = req.group_instance_id
        new_id = self._new_member_id(group, iid if iid is not None else req.client_id)
        if iid is not None:
            old_id = group.static_members.get(iid)
            if old_id is not None:
                self._replace_static_member(group, old_id, new_id, req, handle, now_ms, out)
            else:
                self._add_member_and_rebalance(group, new_id, req, handle, now_ms, out)
        elif req.api_version >= 4:
            group.pending_members[new_id] = self.reg.push(
                now_ms + req.session_timeout_ms, TimerKind.PENDING_MEMBER, group.group_id, new_id
            )
            out.complete(handle, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, new_id, req, handle, now_ms, out)

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinRequest, handle: Handle, now_ms: int, out: Output
    ) -> None:
        member_id = req.member_id
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            out.complete(handle, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if req.group_instance_id is None and member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, req, handle, now_ms, out)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not ErrorCode.NONE:
            out.complete(handle, JoinGroupResult(error, member_id=member_id))
            return
        m = group.members[member_id]
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, m, req, handle, now_ms, out)
        elif group.is_(COMPLETING):
            if m.matches(req.protocols):
                # The member probably missed the JoinGroup answer: repeat it.
                out.complete(handle, self._join_result(group, m, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, m, req, handle, now_ms, out)
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not m.matches(req.protocols):
                # A rejoining leader signals a change the metadata does not show (e.g. new partitions).
                self._update_member_and_rebalance(group, m, req, handle, now_ms, out)
            else:
                out.complete(handle, self._join_result(group, m, False))
        else:
            out.complete(handle, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        member_id: str,
        req: JoinRequest,
        handle: Handle,
        now_ms: int,
        out: Output,
    ) -> None:
        m = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            join_handle=handle,
            is_new=True,
        )
        if group.is_(PREPARING) and group.in_initial_delay:
            group.new_member_added = True
        group.add(m)
        # Parked new members cannot heartbeat; bound them by the new-member timeout instead.
        self.schedule_heartbeat(group, m, now_ms, self.config.group_new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, m: Member, req: JoinRequest, handle: Handle, now_ms: int, out: Output
    ) -> None:
        group.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        if m.join_handle is not None:
            out.complete(
                m.join_handle, JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id)
            )
        m.join_handle = handle
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        old_id: str,
        new_id: str,
        req: JoinRequest,
        handle: Handle,
        now_ms: int,
        out: Output,
    ) -> None:
        current_leader = group.leader_id
        m = group.members[old_id]
        self.fail_parked(m, ErrorCode.FENCED_INSTANCE_ID, out)
        group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        m.client_id, m.client_host = req.client_id, req.client_host
        m.session.clear()  # the armed entry names the old id
        self.schedule_heartbeat(group, m, now_ms)
        group.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: persist the new member id and hand back the current generation.
                self.store_group(group, out)
                if req.api_version >= 9:
                    is_leader = group.is_leader(new_id)
                    out.complete(handle, self._join_result(group, m, is_leader, skip_assignment=is_leader))
                else:
                    # Older clients would recompute the assignment if told they lead.
                    out.complete(handle, self._join_result(group, m, False, leader=current_leader))
            else:
                m.join_handle = handle
                self.prepare_rebalance(group, now_ms, out)
        else:
            # CompletingRebalance: the leader may be assigning to the old id, so rebalance again.
            m.join_handle = handle
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(self, req: SyncRequest, *, now_ms: int, handle: Handle) -> Output:
        """SyncGroup; the answer arrives as a completion."""
        out = Output()
        self.reg.run_timers(now_ms, out)
        group = self.group(req.group_id)
        error = ErrorCode.NONE
        if not req.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif (e := self.reg.coordinator_error(req.group_id)) is not ErrorCode.NONE:
            error = e
        elif group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif (e := group.validate_member(req.member_id, req.group_instance_id)) is not ErrorCode.NONE:
            error = e
        elif req.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        elif _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        elif group.is_(EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_(PREPARING):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not ErrorCode.NONE or group is None:
            out.complete(handle, SyncGroupResult(error))
            return out

        m = group.members[req.member_id]
        self._pending_sync_received(group, req.member_id)
        if group.is_(STABLE):
            out.complete(
                handle,
                SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, m.assignment),
            )
            self.schedule_heartbeat(group, m, now_ms)
            return out
        # CompletingRebalance: park, and finish the generation if this is the leader.
        if m.sync_handle is not None:
            out.complete(m.sync_handle, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        m.sync_handle = handle
        if group.is_leader(req.member_id):
            given = dict(req.assignments.items() if isinstance(req.assignments, Mapping) else req.assignments)
            for mm in group.members.values():
                mm.assignment = bytes(given.get(mm.member_id, b""))
            self.store_group(group, out)
            group.transition(STABLE, now_ms)
            for mm in group.members.values():
                if mm.sync_handle is not None:
                    out.complete(
                        mm.sync_handle,
                        SyncGroupResult(
                            ErrorCode.NONE, group.protocol_type, group.protocol_name, mm.assignment
                        ),
                    )
                    mm.sync_handle = None
                    self.schedule_heartbeat(group, mm, now_ms)
        return out

    def _pending_sync_received(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_timer = None

    # ------------------------------------------------------------------ Heartbeat

    def heartbeat(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        now_ms: int,
    ) -> Output:
        """Heartbeat; `Output.response` is the ErrorCode. Extends the member's session."""
        out = Output()
        self.reg.run_timers(now_ms, out)
        out.response = self._heartbeat(group_id, generation_id, member_id, group_instance_id, now_ms)
        return out

    def _heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (e := self.reg.coordinator_error(group_id)) is not ErrorCode.NONE:
            return e
        group = self.group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if (e := group.validate_member(member_id, group_instance_id)) is not ErrorCode.NONE:
            return e
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.members[member_id], now_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]], *, now_ms: int) -> Output:
        """LeaveGroup: `members` are (member_id, group_instance_id); v0-2 send one, instance id None.

        A static member may be named by group.instance.id alone (member_id ""), as admin tools do.
        `Output.response` is a LeaveGroupResult.
        """
        out = Output()
        self.reg.run_timers(now_ms, out)
        members = list(members)
        top = ErrorCode.NONE
        if not group_id:
            top = ErrorCode.INVALID_GROUP_ID
        elif (e := self.reg.coordinator_error(group_id)) is not ErrorCode.NONE:
            top = e
        elif self.group(group_id) is None:
            top = ErrorCode.UNKNOWN_MEMBER_ID
        if top is not ErrorCode.NONE:
            out.response = LeaveGroupResult(
                top, tuple(LeaveMemberResult(mid, iid, top) for mid, iid in members)
            )
            return out
        group = self.group(group_id)
        assert group is not None
        results = []
        for mid, iid in members:
            error = ErrorCode.NONE
            if not mid:
                target = group.static_members.get(iid) if iid is not None else None
                if target is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update(group, group.members[target], now_ms, out)
            elif mid in group.pending_members and iid is None:
                del group.pending_members[mid]
                if group.is_(PREPARING):
                    self._maybe_complete_join(group, now_ms, out)
            else:
                error = group.validate_member(mid, iid)
                if error is ErrorCode.NONE:
                    self._remove_member_and_update(group, group.members[mid], now_ms, out)
            results.append(LeaveMemberResult(mid, iid, error))
        out.response = LeaveGroupResult(ErrorCode.NONE, tuple(results))
        return out

    # ------------------------------------------------------------------ offset commits

    def validate_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        api_version: int,
    ) -> ErrorCode:
        """Whether an OffsetCommit to a classic group (or a new group id) is accepted."""
        group = self.group(group_id)
        if group is None:
            if generation_id < 0:
                return ErrorCode.NONE  # created by the commit: a standalone / admin group
            return ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
        return group.validate_commit(generation_id, member_id, group_instance_id)

    def validate_txn_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        group = self.group(group_id)
        return (
            ErrorCode.NONE
            if group is None
            else group.validate_txn_commit(generation_id, member_id, group_instance_id)
        )

    def committed(self, group_id: str, generation_id: int, member_id: str, now_ms: int) -> None:
        """An OffsetCommit was accepted: the group exists from now on, and a member's commit counts
        as a heartbeat."""
        group = self.get_or_create(group_id, now_ms)
        m = group.members.get(member_id)
        if m is not None and generation_id >= 0:
            self.schedule_heartbeat(group, m, now_ms)

    def delete(self, group: ClassicGroup, out: Output) -> None:
        """Remove the group with a GroupMetadata tombstone (its offsets are the caller's)."""
        group.transition(GroupState.DEAD, group.state_timestamp_ms or 0)
        out.records.append(CoordinatorRecord(group.partition, group_metadata_key(group.group_id), None))
        self.reg.remove(group.group_id)

    def replay(self, group_id: str, value: bytes | None, partition: int) -> None:
        """A GroupMetadata record of a replayed partition."""
        if value is None:
            if self.group(group_id) is not None:
                self.reg.remove(group_id)
        else:
            self.reg.put(ClassicGroup.from_metadata(group_id, partition, decode_group_value(bytes(value))))

    def loaded(self, group: ClassicGroup, now_ms: int) -> None:
        """Loaded members are not trusted to be alive: their sessions start now."""
        for m in group.members.values():
            self.schedule_heartbeat(group, m, now_ms)

    # ------------------------------------------------------------------ timers

    def _heartbeat_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        m = group.members.get(t.member_id) if group is not None else None
        return m is not None and m.session.seq == t.seq

    def _pending_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        return group is not None and group.pending_members.get(t.member_id) == t.seq

    def _join_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        return group is not None and group.join_timer == t.seq

    def _sync_live(self, t: Timer) -> bool:
        group = self.group(t.group_id)
        return group is not None and group.sync_timer == t.seq

    def _on_pending_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        del group.pending_members[t.member_id]
        if group.is_(PREPARING):
            self._maybe_complete_join(group, now_ms, out)

    def schedule_heartbeat(self, group: ClassicGroup, m: Member, now_ms: int, timeout_ms: int = -1) -> None:
        deadline = now_ms + (m.session_timeout_ms if timeout_ms < 0 else timeout_ms)
        self.reg.arm(m.session, deadline, TimerKind.HEARTBEAT, group.group_id, m.member_id)

    def _on_heartbeat_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        m = group.members[t.member_id]
        if not self.reg.due(m.session, t, now_ms):
            return
        if m.is_new or not (m.awaiting_join or m.awaiting_sync):
            self._remove_member_and_update(group, m, now_ms, out)
        # else: parked members are kept alive; the session restarts when their request completes.

    def _on_join_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        group.join_timer = None
        deadline_ms = t.deadline_ms
        if not group.is_(PREPARING):
            return
        if group.in_initial_delay:
            if group.new_member_added and group.initial_delay_remaining_ms > 0:
                group.new_member_added = False
                delay = min(self.config.group_initial_rebalance_delay_ms, group.initial_delay_remaining_ms)
                group.initial_delay_remaining_ms -= delay
                # From the deadline, not from now: a late tick must not stretch the window.
                group.join_timer = self.reg.push(deadline_ms + delay, TimerKind.JOIN, group.group_id)
                return
            group.in_initial_delay = False
        self._complete_join(group, now_ms, out)

    def _on_sync_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        group = self.group(t.group_id)
        assert group is not None
        group.sync_timer = None
        if group.state not in (COMPLETING, STABLE) or not group.pending_sync:
            return
        for m in [m for m in group.members.values() if m.member_id in group.pending_sync]:
            self.fail_parked(m, ErrorCode.UNKNOWN_MEMBER_ID, out)
            group.remove(m.member_id)
        self.prepare_rebalance(group, now_ms, out)

    # ------------------------------------------------------------------ rebalance steps

    def fail_parked(self, m: Member, error: ErrorCode, out: Output) -> None:
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
            self.prepare_rebalance(group, now_ms, out)
        else:
            self._maybe_complete_join(group, now_ms, out)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int, out: Output) -> None:
        if group.is_(COMPLETING):
            # Parked SyncGroups of the aborted generation must rejoin.
            for m in group.members.values():
                m.assignment = b""
                if m.sync_handle is not None:
                    out.complete(m.sync_handle, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.sync_handle = None
                    self.schedule_heartbeat(group, m, now_ms)
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
        group.join_timer = self.reg.push(now_ms + delay, TimerKind.JOIN, group.group_id)
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
                self.fail_parked(m, ErrorCode.UNKNOWN_MEMBER_ID, out)
                group.remove(m.member_id)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that have not rejoined are left: wait for them or their expiry.
            group.join_timer = self.reg.push(
                now_ms + max(group.rebalance_timeout_ms, 1), TimerKind.JOIN, group.group_id
            )
            return
        group.init_next_generation(now_ms)
        if group.is_(EMPTY):
            self.store_group(group, out)
            return
        for m in group.members.values():
            if m.join_handle is not None:
                out.complete(m.join_handle, self._join_result(group, m, group.is_leader(m.member_id)))
                m.join_handle = None
            self.schedule_heartbeat(group, m, now_ms)
            m.is_new = False
            group.pending_sync.add(m.member_id)
        group.sync_timer = self.reg.push(now_ms + group.rebalance_timeout_ms, TimerKind.SYNC, group.group_id)

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
        self.fail_parked(m, ErrorCode.UNKNOWN_MEMBER_ID, out)
        group.remove(m.member_id)
        if group.state in (STABLE, COMPLETING):
            self.prepare_rebalance(group, now_ms, out)
        elif group.is_(PREPARING):
            self._maybe_complete_join(group, now_ms, out)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
