"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

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
from dataclasses import dataclass

from pylog.groups.group import ClassicGroup, Member, Protocols
from pylog.groups.rebalance import COMPLETING, EMPTY, PREPARING, STABLE, GroupRebalancing
from pylog.groups.timers import TimerKind
from pylog.groups.types import (
    Handle,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    Output,
    SyncGroupResult,
)
from pylog.protocol.errors import ErrorCode


@dataclass(frozen=True)
class _JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    api_version: int


class GroupMembership(GroupRebalancing):
    """The membership APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup."""

    # ------------------------------------------------------------------ JoinGroup

    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Iterable[tuple[str, bytes]],
        *,
        reason: str | None = None,
        api_version: int,
        now_ms: int,
        handle: Handle,
    ) -> Output:
        """JoinGroup (all versions). The answer for `handle` arrives in some `Output.completions`.

        `rebalance_timeout_ms` < 0 (v0) means the session timeout. `reason` (v8+) is informational.
        """
        out = Output()
        self._run_timers(now_ms, out)
        uniq: dict[str, bytes] = {}
        for name, metadata in protocols:
            uniq.setdefault(name, bytes(metadata))
        req = _JoinRequest(
            group_id,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            session_timeout_ms if rebalance_timeout_ms < 0 else rebalance_timeout_ms,
            protocol_type,
            tuple(uniq.items()),
            api_version,
        )
        error = ErrorCode.NONE
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            error = e
        elif not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        elif member_id and group_id not in self._groups:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not ErrorCode.NONE:
            out.complete(handle, JoinGroupResult(error, member_id=member_id))
            return out

        is_new_group = group_id not in self._groups
        group = self._get_or_create(group_id, now_ms)
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
            self._store_group(group, out)
        self._run_timers(now_ms, out)
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
        self, group: ClassicGroup, req: _JoinRequest, handle: Handle, now_ms: int, out: Output
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
            group.pending_members[new_id] = self._timers.push(
                now_ms + req.session_timeout_ms, TimerKind.PENDING_MEMBER, group.group_id, new_id
            )
            out.complete(handle, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, new_id, req, handle, now_ms, out)

    def _join_existing_member(
        self, group: ClassicGroup, req: _JoinRequest, handle: Handle, now_ms: int, out: Output
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
        req: _JoinRequest,
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
        self._schedule_heartbeat(group, m, now_ms, self.config.group_new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, m: Member, req: _JoinRequest, handle: Handle, now_ms: int, out: Output
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
        req: _JoinRequest,
        handle: Handle,
        now_ms: int,
        out: Output,
    ) -> None:
        current_leader = group.leader_id
        m = group.members[old_id]
        self._fail_parked(m, ErrorCode.FENCED_INSTANCE_ID, out)
        group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        m.client_id, m.client_host = req.client_id, req.client_host
        m.heartbeat_timer = None  # the armed entry names the old id
        self._schedule_heartbeat(group, m, now_ms)
        group.update_member(m, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms)
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: persist the new member id and hand back the current generation.
                self._store_group(group, out)
                if req.api_version >= 9:
                    is_leader = group.is_leader(new_id)
                    out.complete(handle, self._join_result(group, m, is_leader, skip_assignment=is_leader))
                else:
                    # Older clients would recompute the assignment if told they lead.
                    out.complete(handle, self._join_result(group, m, False, leader=current_leader))
            else:
                m.join_handle = handle
                self._prepare_rebalance(group, now_ms, out)
        else:
            # CompletingRebalance: the leader may be assigning to the old id, so rebalance again.
            m.join_handle = handle
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms, out)

    # ------------------------------------------------------------------ SyncGroup

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
        *,
        now_ms: int,
        handle: Handle,
    ) -> Output:
        """SyncGroup; `assignments` matter only from the leader. The answer arrives as a completion."""
        out = Output()
        self._run_timers(now_ms, out)
        group = self._groups.get(group_id)
        error = ErrorCode.NONE
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            error = e
        elif group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif (e := group.validate_member(member_id, group_instance_id)) is not ErrorCode.NONE:
            error = e
        elif generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        elif _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        elif group.is_(EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif group.is_(PREPARING):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not ErrorCode.NONE or group is None:
            out.complete(handle, SyncGroupResult(error))
            return out

        m = group.members[member_id]
        self._pending_sync_received(group, member_id)
        if group.is_(STABLE):
            out.complete(
                handle,
                SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, m.assignment),
            )
            self._schedule_heartbeat(group, m, now_ms)
            return out
        # CompletingRebalance: park, and finish the generation if this is the leader.
        if m.sync_handle is not None:
            out.complete(m.sync_handle, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        m.sync_handle = handle
        if group.is_leader(member_id):
            given = dict(assignments.items() if isinstance(assignments, Mapping) else assignments)
            for mm in group.members.values():
                mm.assignment = bytes(given.get(mm.member_id, b""))
            self._store_group(group, out)
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
                    self._schedule_heartbeat(group, mm, now_ms)
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
        self._run_timers(now_ms, out)
        out.response = self._heartbeat(group_id, generation_id, member_id, group_instance_id, now_ms)
        return out

    def _heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            return e
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if (e := group.validate_member(member_id, group_instance_id)) is not ErrorCode.NONE:
            return e
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id], now_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    # ------------------------------------------------------------------ LeaveGroup

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]], *, now_ms: int) -> Output:
        """LeaveGroup: `members` are (member_id, group_instance_id); v0-2 send one, instance id None.

        A static member may be named by group.instance.id alone (member_id ""), as admin tools do.
        `Output.response` is a LeaveGroupResult.
        """
        out = Output()
        self._run_timers(now_ms, out)
        members = list(members)
        top = ErrorCode.NONE
        if not group_id:
            top = ErrorCode.INVALID_GROUP_ID
        elif (e := self._coordinator_error(group_id)) is not ErrorCode.NONE:
            top = e
        elif group_id not in self._groups:
            top = ErrorCode.UNKNOWN_MEMBER_ID
        if top is not ErrorCode.NONE:
            out.response = LeaveGroupResult(
                top, tuple(LeaveMemberResult(mid, iid, top) for mid, iid in members)
            )
            return out
        group = self._groups[group_id]
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


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
