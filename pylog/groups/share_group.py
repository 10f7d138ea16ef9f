"""The state of one share group (KIP-932) and its members, as data (see `share` for the rules)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from pylog.groups.group_records import Assignment
from pylog.groups.timers import Deadline


@dataclass
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    session: Deadline = field(default_factory=Deadline)


@dataclass
class ShareGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    subscribed_partitions: dict[uuid.UUID, int] | None = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # by member, as of assignment_epoch
    assignment_epoch: int = 0  # behind group_epoch: the next heartbeat computes a new target
    # Partition counts of the topics whose share state is initialized: only those are assigned
    # (None after loading: every subscribed partition counts as initialized).
    initialized: dict[uuid.UUID, int] | None = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def assigned_partitions(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for m in self.members.values() for t, ps in m.assigned.items() for p in ps}
