"""Both consumer protocols in one group: online conversion between classic and consumer groups, and
classic members of a consumer group (`group.consumer.migration.policy`, KIP-848's upgrade path).

Theory of operation
-------------------
A group is of one type at a time; which one follows its members, as in Kafka 4:

* Upgrade. A ConsumerGroupHeartbeat (epoch 0) for a classic group with members converts it when
  the policy allows upgrades, every member uses the embedded "consumer" protocol and the group is
  not larger than `group.consumer.max.size`. Each classic member becomes a consumer-group member
  that keeps speaking the classic protocol: its epoch is the generation, its current and target
  assignment the partitions of its last SyncGroup assignment, Stable. Parked JoinGroups and
  SyncGroups answer REBALANCE_IN_PROGRESS. The records are a GroupMetadata tombstone, then the
  consumer group's records, so a replay ends in the same state. The new member's heartbeat then
  bumps the group epoch and computes a target like any other.
* Classic members of a consumer group are served through the classic APIs, mapped onto the
  consumer protocol's assignment: JoinGroup is a heartbeat that brings the subscription (and, v1+,
  the owned partitions) and answers at once with the member epoch as generation and no leader;
  SyncGroup answers the member's current assignment, serialised as a ConsumerProtocolAssignment;
  Heartbeat answers REBALANCE_IN_PROGRESS while the member is behind the group epoch, must revoke,
  or may pick up released partitions, so the client rejoins and reconciles one step. A classic
  member that does not rejoin or sync within its rebalance timeout, or stops heartbeating for its
  session timeout, is fenced. LeaveGroup removes it.
* Downgrade. When the last member that speaks the consumer protocol leaves or is fenced and the
  others (at least one) are classic members, the policy allows downgrades and they fit in
  `group.max.size`, the group becomes a classic group again: Stable at the group epoch, each
  member's assignment its target, and a rebalance starts so they rejoin as a plain classic group.
  The records are the consumer group's tombstones, then a GroupMetadata value.

Time and topic metadata are passed in; topic ids map to names through the `TopicsView` the
caller gives (partitions of topics that no longer exist are dropped).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from pylog.groups.classic import ClassicProtocol
from pylog.groups.consumer import ConsumerProtocol, TopicsView
from pylog.groups.consumer_group import ClassicMemberMetadata, ConsumerGroup, ConsumerMember
from pylog.groups.consumer_protocol import (
    MalformedConsumerProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from pylog.groups.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState, Member
from pylog.groups.group_records import (
    CONSUMER_GROUP_TARGET_MEMBER,
    CONSUMER_GROUP_TARGET_METADATA,
    Assignment,
    normalise,
    to_wire,
)
from pylog.groups.reconciliation import MemberAssignment, MemberState
from pylog.groups.records import group_metadata_key
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


class Migration:
    """Conversions between classic and consumer groups, and classic members of consumer groups."""

    def __init__(self, registry: GroupRegistry, classic: ClassicProtocol, consumer: ConsumerProtocol) -> None:
        self.reg = registry
        self.classic = classic
        self.consumer = consumer
        self.topics: TopicsView = {}  # the latest topic metadata a call brought
        consumer.downgrade = self.maybe_downgrade
        registry.on_timer(TimerKind.CONSUMER_SYNC, self._rebalance_live, self._on_rebalance_timer)

    # ------------------------------------------------------------------ upgrade

    def can_upgrade(self, group: ClassicGroup) -> bool:
        return (
            self.consumer.config.upgrade_enabled
            and bool(group.members)
            and group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and len(group.members) <= self.consumer.config.max_size
        )

    def upgrade(self, group: ClassicGroup, now_ms: int, out: Output) -> ConsumerGroup | None:
        """The consumer group `group` becomes; None (nothing changed) if a member's embedded
        protocol does not parse."""
        members: list[ConsumerMember] = []
        try:
            for m in group.members.values():
                sub = decode_subscription(m.metadata_for(group.protocol_name))
                assigned = self._to_ids(decode_assignment(m.assignment))
                cm = ConsumerMember(
                    m.member_id,
                    m.group_instance_id,
                    sub.rack_id,
                    m.client_id,
                    m.client_host,
                    tuple(sorted(set(sub.topics))),
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    assignment=MemberAssignment(
                        MemberState.STABLE, group.generation_id, group.generation_id, assigned
                    ),
                    classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
                )
                members.append(cm)
        except MalformedConsumerProtocol:
            return None
        for m in group.members.values():
            self.classic.fail_parked(m, ErrorCode.REBALANCE_IN_PROGRESS, out)
        out.records.append(CoordinatorRecord(group.partition, group_metadata_key(group.group_id), None))
        cg = ConsumerGroup(
            group.group_id,
            group.partition,
            group_epoch=group.generation_id,
            assignment_epoch=group.generation_id,
            subscribed_partitions=None,
        )
        self.reg.put(cg)
        for cm in members:
            self.consumer.add_member(cg, cm, out)
        out.records.append(
            self.consumer.record(cg, 3, None, {"epoch": cg.group_epoch})  # ConsumerGroupMetadata
        )
        for cm in members:
            cg.target[cm.member_id] = cm.assignment.assigned
            out.records.append(
                self.consumer.record(
                    cg,
                    CONSUMER_GROUP_TARGET_MEMBER,
                    cm.member_id,
                    {"topic_partitions": to_wire(cm.assignment.assigned)},
                )
            )
        out.records.append(
            self.consumer.record(
                cg, CONSUMER_GROUP_TARGET_METADATA, None, {"assignment_epoch": cg.assignment_epoch}
            )
        )
        for cm in members:
            self.consumer.write_current(cg, cm, out)
            self._arm_session(cg, cm, now_ms)
        return cg

    # ------------------------------------------------------------------ downgrade

    def maybe_downgrade(
        self, group: ConsumerGroup, leaving: ConsumerMember, now_ms: int, out: Output
    ) -> bool:
        """`leaving` is being fenced: turn the group into a classic group if only classic members
        remain (and the policy and `group.max.size` allow). True if it did."""
        rest = [m for mid, m in group.members.items() if mid != leaving.member_id]
        if (
            not rest
            or any(m.classic is None for m in rest)
            or not self.consumer.config.downgrade_enabled
            or len(rest) > self.classic.config.group_max_size
        ):
            return False
        cg = ClassicGroup(
            group.group_id,
            group.partition,
            state=GroupState.STABLE,
            state_timestamp_ms=now_ms,
            generation_id=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
        )
        for m in rest:
            assert m.classic is not None
            cg.add(
                Member(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.classic.session_timeout_ms,
                    CONSUMER_PROTOCOL_TYPE,
                    m.classic.protocols,
                )
            )
        candidates = {n for n, c in cg.supported_protocols.items() if c == len(cg.members)}
        if not candidates:
            return False
        cg.protocol_name = cg.select_protocol()
        cg.subscribed_topics = cg._compute_subscribed_topics()
        for m in rest:
            target = group.target.get(m.member_id, {})
            metadata = cg.members[m.member_id].metadata_for(cg.protocol_name)
            cg.members[m.member_id].assignment = encode_assignment(
                self._to_names(target), subscription_version(metadata)
            )
        self.consumer.tombstone_group(group, out)
        self.reg.put(cg)
        self.classic.store_group(cg, out)
        for member in cg.members.values():
            self.classic.schedule_heartbeat(cg, member, now_ms)
        self.classic.prepare_rebalance(cg, now_ms, out)
        return True

    # ------------------------------------------------------------------ classic members of a consumer group

    def join(
        self, group: ConsumerGroup, req: JoinRequest, *, now_ms: int, handle: Handle, out: Output
    ) -> None:
        """JoinGroup of a classic member to a consumer group: answered at once (a completion)."""
        member_id, instance_id, client_id = req.member_id, req.group_instance_id, req.client_id
        protocols = req.protocols
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            out.complete(handle, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        try:
            sub = decode_subscription(protocols[0][1])
        except MalformedConsumerProtocol:
            out.complete(handle, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        existing = group.members.get(member_id) if member_id else None
        if instance_id is not None:
            previous_id = group.static_members.get(instance_id)
            if previous_id is not None and previous_id != member_id:
                # A static member restarting: the new id replaces the old one.
                self.consumer.remove_member(group, group.members[previous_id], out)
                self.consumer.bump_epoch(group, out)
        elif existing is None and req.api_version >= 4 and not member_id:
            new_id = self.reg.new_member_id(client_id, group.members)
            out.complete(handle, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
            return
        if existing is not None and existing.classic is None:
            out.complete(handle, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        if existing is None:
            if len(group.members) >= self.consumer.config.max_size:
                out.complete(handle, JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id))
                return
            existing = ConsumerMember(
                member_id or self.reg.new_member_id(client_id, group.members), instance_id
            )
            group.members[existing.member_id] = existing
            if instance_id is not None:
                group.static_members[instance_id] = existing.member_id
            bump = True
        else:
            bump = False
        m = existing
        topics = tuple(sorted(set(sub.topics)))
        bump |= topics != m.subscribed_topic_names
        m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor = topics, None, None
        m.rack_id = sub.rack_id
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
        m.client_id, m.client_host = client_id, req.client_host
        m.classic = ClassicMemberMetadata(req.session_timeout_ms, protocols)
        self.consumer.write_member(group, m, out)
        if bump:
            self.consumer.bump_epoch(group, out)
        if self.consumer._refresh_subscribed_partitions(group, self.topics):
            self.consumer.bump_epoch(group, out)
        self.consumer.update_target(group, self.topics, out)
        self.consumer.reconcile(group, m, self._to_ids(sub.owned or {}), now_ms, out)
        self._arm_session(group, m, now_ms)
        self.reg.arm(
            m.sync, now_ms + req.rebalance_timeout_ms, TimerKind.CONSUMER_SYNC, group.group_id, m.member_id
        )
        out.complete(
            handle,
            JoinGroupResult(
                ErrorCode.NONE,
                member_id=m.member_id,
                generation_id=m.member_epoch,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=protocols[0][0],
                leader="",
            ),
        )

    def sync(
        self, group: ConsumerGroup, req: SyncRequest, *, now_ms: int, handle: Handle, out: Output
    ) -> None:
        """SyncGroup of a classic member of a consumer group: its assignment, answered at once."""
        m, error = self._classic_member(group, req.member_id, req.group_instance_id)
        if m is None or m.classic is None:
            out.complete(handle, SyncGroupResult(error))
            return
        protocol_type, protocol_name = req.protocol_type, req.protocol_name
        if req.generation_id != m.member_epoch:
            out.complete(handle, SyncGroupResult(ErrorCode.ILLEGAL_GENERATION))
            return
        names = [n for n, _ in m.classic.protocols]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != names[0]
        ):
            out.complete(handle, SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.group_epoch > m.member_epoch and m.assignment.state is not MemberState.UNREVOKED_PARTITIONS:
            self._arm_rebalance_if_absent(group, m, now_ms)
            out.complete(handle, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        m.sync.clear()
        self._arm_session(group, m, now_ms)
        version = subscription_version(m.classic.protocols[0][1])
        assignment = encode_assignment(self._to_names(m.assignment.assigned), version)
        out.complete(handle, SyncGroupResult(ErrorCode.NONE, CONSUMER_PROTOCOL_TYPE, names[0], assignment))

    def heartbeat(
        self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        m, error = self._classic_member(group, member_id, instance_id)
        if m is None:
            return error
        if generation_id != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._arm_session(group, m, now_ms)
        state = m.assignment.state
        if (
            m.member_epoch < group.group_epoch
            or state is MemberState.UNREVOKED_PARTITIONS
            or (state is MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, m))
        ):
            self._arm_rebalance_if_absent(group, m, now_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, group: ConsumerGroup, members: Iterable[tuple[str, str | None]], out: Output
    ) -> LeaveGroupResult:
        results = []
        removed = False
        for mid, iid in members:
            if iid is not None:
                target_id = group.static_members.get(iid)
                m = group.members.get(target_id) if target_id is not None else None
                if m is None:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
                elif mid and mid != m.member_id:
                    error = ErrorCode.FENCED_INSTANCE_ID
                else:
                    error = ErrorCode.NONE if m.classic is not None else ErrorCode.UNKNOWN_MEMBER_ID
            else:
                m = group.members.get(mid)
                error = (
                    ErrorCode.NONE if m is not None and m.classic is not None else ErrorCode.UNKNOWN_MEMBER_ID
                )
            if error is ErrorCode.NONE and m is not None:
                self.consumer.remove_member(group, m, out)
                removed = True
            results.append(LeaveMemberResult(mid, iid, error))
        if removed:
            self.consumer.bump_epoch(group, out)
        return LeaveGroupResult(ErrorCode.NONE, tuple(results))

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        if instance_id is not None:
            mid = group.static_members.get(instance_id)
            if mid is None:
                return None, ErrorCode.UNKNOWN_MEMBER_ID
            if mid != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        m = group.members.get(member_id)
        if m is None or m.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        return m, ErrorCode.NONE

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, m: ConsumerMember) -> bool:
        holders = group.holders(m.member_id)
        for t, ps in group.target.get(m.member_id, {}).items():
            for p in ps - m.assignment.assigned.get(t, frozenset()):
                if (t, p) in holders:
                    return True
        return False

    # ------------------------------------------------------------------ timers

    def _arm_session(self, group: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        self.reg.arm(
            m.session,
            now_ms + self.consumer.session_timeout_ms(group.group_id, m),
            TimerKind.CONSUMER_SESSION,
            group.group_id,
            m.member_id,
        )

    def _arm_rebalance_if_absent(self, group: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        if m.sync.deadline_ms is None:
            self.reg.arm(
                m.sync, now_ms + m.rebalance_timeout_ms, TimerKind.CONSUMER_SYNC, group.group_id, m.member_id
            )

    def _rebalance_live(self, t: Timer) -> bool:
        group = self.consumer.group(t.group_id)
        m = group.members.get(t.member_id) if group is not None else None
        return m is not None and m.sync.seq == t.seq

    def _on_rebalance_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        """A classic member did not rejoin / sync within its rebalance timeout: fence it."""
        group = self.consumer.group(t.group_id)
        assert group is not None
        m = group.members[t.member_id]
        if self.reg.due(m.sync, t, now_ms):
            self.consumer.fence(group, m, now_ms, out)

    # ------------------------------------------------------------------ topic names <-> ids

    def _to_ids(self, partitions: dict[str, frozenset[int]]) -> Assignment:
        out: dict[uuid.UUID, frozenset[int]] = {}
        for name, ps in partitions.items():
            t = self.topics.get(name)
            if t is not None:
                out[t[0]] = frozenset(p for p in ps if p < t[1])
        return normalise(out)

    def _to_names(self, assignment: Assignment) -> dict[str, frozenset[int]]:
        names = {tid: name for name, (tid, _) in self.topics.items()}
        return {names[t]: ps for t, ps in assignment.items() if t in names}
