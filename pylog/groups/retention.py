"""Offsets retention (Kafka's `offsets.retention.minutes`): which groups' committed offsets may
expire, and the periodic cleanup that expires them and deletes classic groups left with nothing.

A group with members keeps its offsets (Kafka 2.1+), except, for a Stable classic consumer group,
those of topics it no longer subscribes to; an Empty group's offsets expire one retention period
after it became Empty; consumer and share groups' offsets expire once they have no member. The
cleanup runs on the registry's timer queue every `offsets_retention_check_interval_ms`, armed
when the first partition is loaded. Nothing here reads a clock: every call takes `now_ms`.
"""

from __future__ import annotations

from pylog.groups.classic import ClassicProtocol
from pylog.groups.consumer_group import ConsumerGroup
from pylog.groups.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from pylog.groups.offsets import ExpiryBasis, OffsetStore
from pylog.groups.registry import GroupRegistry
from pylog.groups.share_group import ShareGroup
from pylog.groups.streams_group import StreamsGroup
from pylog.groups.timers import Timer, TimerKind
from pylog.groups.types import Output


class OffsetRetention:
    def __init__(self, registry: GroupRegistry, offsets: OffsetStore, classic: ClassicProtocol) -> None:
        self._registry = registry
        self._offsets = offsets
        self._classic = classic
        self._seq: int | None = None
        registry.on_timer(TimerKind.OFFSETS_RETENTION, self._live, self._on_timer)

    def arm(self, now_ms: int) -> None:
        """Start the periodic cleanup, if it is not running yet."""
        if self._seq is None:
            self._schedule(now_ms)

    def expire(self, now_ms: int, out: Output) -> None:
        """Expire what retention allows now; delete the classic groups left with nothing."""
        self._offsets.expire(self.expiry_basis, now_ms, out)
        for group in list(self._registry.of_type(ClassicGroup)):
            if (
                group.is_(GroupState.EMPTY)
                and not group.members
                and not group.pending_members
                and not self._offsets.has_offsets(group.group_id)
                and not self._offsets.has_pending(group.group_id)
            ):
                self._classic.delete(group, out)

    def expiry_basis(self, group_id: str) -> ExpiryBasis | None:
        """From when (and for which topics) the group's offsets may expire; None: they may not."""
        g = self._registry.groups.get(group_id)
        if isinstance(g, (ConsumerGroup, ShareGroup, StreamsGroup)):
            return None if g.members else ExpiryBasis()
        if g is None or g.protocol_type is None:
            return ExpiryBasis()
        if g.is_(GroupState.EMPTY):
            return ExpiryBasis(g.state_timestamp_ms)
        if (
            g.protocol_type == CONSUMER_PROTOCOL_TYPE
            and g.subscribed_topics is not None
            and g.is_(GroupState.STABLE)
        ):
            return ExpiryBasis(None, g.subscribed_topics)
        return None

    def _live(self, t: Timer) -> bool:
        return t.seq == self._seq

    def _on_timer(self, t: Timer, now_ms: int, out: Output) -> None:
        self.expire(now_ms, out)
        self._schedule(now_ms)

    def _schedule(self, now_ms: int) -> None:
        interval = self._registry.config.offsets_retention_check_interval_ms
        self._seq = self._registry.push(now_ms + interval, TimerKind.OFFSETS_RETENTION, "")
