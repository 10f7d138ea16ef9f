"""One classic consumer group: its members, generation and protocol.

This is plain data plus the group-local rules (protocol selection, leader choice, member
validation). Everything that needs time, timers or responses lives in `classic`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from pylog.groups.records import GroupMetadataValue, MemberMetadataValue, consumer_subscription_topics
from pylog.groups.timers import Deadline
from pylog.groups.types import Handle, JoinGroupMember
from pylog.protocol.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


Protocols = tuple[tuple[str, bytes], ...]


@dataclass(eq=False)
class Member:
    """A joined member. `join_handle` / `sync_handle` are its parked JoinGroup / SyncGroup."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_handle: Handle | None = None
    sync_handle: Handle | None = None
    # Joined but not yet part of a completed generation: bounded by the new-member timeout.
    is_new: bool = False
    session: Deadline = field(default_factory=Deadline)  # heartbeat deadline and its timer

    @property
    def awaiting_join(self) -> bool:
        return self.join_handle is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_handle is not None

    def metadata_for(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> timer sequence
    pending_sync: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    subscribed_topics: frozenset[str] | None = None
    # Rebalance bookkeeping.
    join_timer: int | None = None
    sync_timer: int | None = None
    in_initial_delay: bool = False
    initial_delay_remaining_ms: int = 0
    new_member_added: bool = False

    # ------------------------------------------------------------------ queries

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[n] == len(self.members) for n in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (ties: first vote cast)."""
        candidates = {n for n, c in self.supported_protocols.items() if c == len(self.members)}
        votes: Counter[str] = Counter()
        for m in self.members.values():
            vote = next(n for n, _ in m.protocols if n in candidates)
            votes[vote] += 1
        return max(votes, key=lambda n: votes[n])  # max keeps the first of equal counts

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def validate_commit(self, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """OffsetCommit: a member commits in its generation; generation -1 without a member (an
        admin or `assign()` consumer) only while the group is Empty."""
        if generation_id < 0 and self.is_(GroupState.EMPTY):
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if (e := self.validate_member(member_id, group_instance_id)) is not ErrorCode.NONE:
                return e
            if generation_id != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not self.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if self.is_(GroupState.COMPLETING_REBALANCE):
            # The member knows the new generation but has no assignment yet.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_txn_commit(
        self, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """TxnOffsetCommit: v0-2 carry no member (accepted whatever the group does); v3+ members are
        checked like OffsetCommit's, without the rebalance check."""
        if group_instance_id is not None and self.static_members.get(group_instance_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        )

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # ------------------------------------------------------------------ mutations

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        for name, _ in member.protocols:
            self.supported_protocols[name] += 1
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            for name, _ in member.protocols:
                self.supported_protocols[name] -= 1
            iid = member.group_instance_id
            if iid is not None and self.static_members.get(iid) == member_id:
                del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def update_member(
        self, member: Member, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int
    ) -> None:
        for name, _ in member.protocols:
            self.supported_protocols[name] -= 1
        for name, _ in protocols:
            self.supported_protocols[name] += 1
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> Member:
        """Give an existing static member a new member id, keeping its place and assignment."""
        member = self.members[old_id]
        member.member_id = new_id
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False if no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            t = consumer_subscription_topics(m.metadata_for(self.protocol_name))
            if t is None:
                return None
            topics |= t
        return frozenset(topics)

    # ------------------------------------------------------------------ persistence

    def metadata_value(self, assignment: Mapping[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue of the current generation (`assignment` overrides members')."""
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(self.protocol_name),
                assignment.get(m.member_id, b"") if assignment is not None else m.assignment,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.state_timestamp_ms if self.state_timestamp_ms is not None else -1,
            members,
        )

    @classmethod
    def from_metadata(cls, group_id: str, partition: int, v: GroupMetadataValue) -> ClassicGroup:
        """A group as loaded from the log: Stable with its members, or Empty."""
        group = cls(
            group_id,
            partition,
            state=GroupState.STABLE if v.members else GroupState.EMPTY,
            state_timestamp_ms=None if v.current_state_timestamp < 0 else v.current_state_timestamp,
            generation_id=v.generation,
            protocol_type=v.protocol_type or None,
            protocol_name=v.protocol,
        )
        for mv in v.members:
            group.add(
                Member(
                    mv.member_id,
                    mv.group_instance_id,
                    mv.client_id,
                    mv.client_host,
                    mv.rebalance_timeout_ms,
                    mv.session_timeout_ms,
                    v.protocol_type,
                    ((v.protocol or "", mv.subscription),),
                    assignment=mv.assignment,
                )
            )
        group.protocol_type = v.protocol_type or None
        group.leader_id = v.leader if v.leader in group.members else next(iter(group.members), None)
        if group.members:
            group.subscribed_topics = group._compute_subscribed_topics()
        return group
