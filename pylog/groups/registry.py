"""The registry of groups: which `__consumer_offsets` partitions are owned or loading, the groups
of every type by id, member ids, and one deadline queue for every state machine's timers.

One group id names one group of one type at a time (classic, consumer, share, streams), as in Kafka; the
state machines (`classic`, `consumer`, `share`) keep their rules, the registry keeps what they
share. A partition is owned only once it was loaded (`loaded`), so a request for any other answers
NOT_COORDINATOR and one for a partition still replaying COORDINATOR_LOAD_IN_PROGRESS.

Timers are entries of a heap with lazy cancellation (`timers.TimerQueue`). A state machine
registers, per `TimerKind`, whether an entry is still live and what firing it does; `run_timers`
fires the live ones due by `now_ms`. A member's deadline that moves later keeps its one armed entry
(`Deadline.arm`): the entry re-arms itself when popped early, so a heartbeat costs no heap push.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, TypeVar

from pylog.groups.consumer_group import ConsumerGroup
from pylog.groups.group import ClassicGroup
from pylog.groups.records import partition_for
from pylog.groups.share_group import ShareGroup
from pylog.groups.streams_group import StreamsGroup
from pylog.groups.timers import Deadline, Timer, TimerKind, TimerQueue
from pylog.groups.types import GroupConfig, Output
from pylog.protocol.errors import ErrorCode

AnyGroup: TypeAlias = ClassicGroup | ConsumerGroup | ShareGroup | StreamsGroup

G = TypeVar("G")

TimerLive = Callable[[Timer], bool]
TimerFire = Callable[[Timer, int, Output], None]


class GroupRegistry:
    """Groups by id, partition ownership and the shared timer queue."""

    def __init__(self, config: GroupConfig, *, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.groups: dict[str, AnyGroup] = {}
        self.timers = TimerQueue()
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._handlers: dict[TimerKind, tuple[TimerLive, TimerFire]] = {}

    # ------------------------------------------------------------------ ownership

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding `group_id`."""
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        p = self.partition_for(group_id)
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    @property
    def any_loading(self) -> bool:
        return bool(self._loading)

    def mark_loading(self, partition: int) -> None:
        self._loading.add(partition)

    def loaded(self, partition: int) -> None:
        self._loading.discard(partition)
        self._owned.add(partition)

    def unloaded(self, partition: int) -> None:
        self._owned.discard(partition)

    def drop_partition(self, partition: int) -> list[AnyGroup]:
        """Forget every group of `partition`; returns them."""
        dropped = [g for g in self.groups.values() if g.partition == partition]
        for g in dropped:
            del self.groups[g.group_id]
        return dropped

    # ------------------------------------------------------------------ groups

    def get(self, group_id: str, kind: type[G]) -> G | None:
        """The group `group_id` if it is of type `kind`."""
        g = self.groups.get(group_id)
        return g if isinstance(g, kind) else None

    def of_type(self, kind: type[G]) -> Iterator[G]:
        return (g for g in list(self.groups.values()) if isinstance(g, kind))

    def put(self, group: AnyGroup) -> None:
        self.groups[group.group_id] = group

    def remove(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    def new_member_id(self, prefix: str | None = None, taken: Any = ()) -> str:
        """A random member id: a UUID, or `prefix-UUID` for classic members (Kafka's client id
        prefix, even when empty)."""
        while True:
            u = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            mid = u if prefix is None else f"{prefix}-{u}"
            if mid not in taken:
                return mid

    # ------------------------------------------------------------------ timers

    def on_timer(self, kind: TimerKind, live: TimerLive, fire: TimerFire) -> None:
        self._handlers[kind] = (live, fire)

    def push(self, deadline_ms: int, kind: TimerKind, group_id: str, member_id: str = "") -> int:
        return self.timers.push(deadline_ms, kind, group_id, member_id)

    def arm(self, d: Deadline, deadline_ms: int, kind: TimerKind, group_id: str, member_id: str) -> None:
        """Set a member's deadline; pushes an entry only when none is armed at or before it."""
        d.deadline_ms = deadline_ms
        if d.seq is None or (d.armed_ms or 0) > deadline_ms:
            d.seq = self.timers.push(deadline_ms, kind, group_id, member_id)
            d.armed_ms = deadline_ms

    def due(self, d: Deadline, t: Timer, now_ms: int) -> bool:
        """Called when `d`'s entry `t` pops: True if the deadline passed; re-arms it if it moved."""
        if d.seq != t.seq:
            return False
        d.seq = None
        if d.deadline_ms is None:
            return False
        if d.deadline_ms > now_ms:
            self.arm(d, d.deadline_ms, t.kind, t.group_id, t.member_id)
            return False
        return True

    def _live(self, t: Timer) -> bool:
        h = self._handlers.get(t.kind)
        return h is not None and h[0](t)

    def next_deadline_ms(self) -> int | None:
        """The earliest live timer (dead entries on top are dropped)."""
        while (t := self.timers.peek()) is not None and not self._live(t):
            self.timers.pop()
        return t.deadline_ms if t is not None else None

    def run_timers(self, now_ms: int, out: Output) -> None:
        while (t := self.timers.peek()) is not None and t.deadline_ms <= now_ms:
            self.timers.pop()
            if self._live(t):
                self._handlers[t.kind][1](t, now_ms, out)
