"""The controller's view of broker liveness: registration, heartbeats, fencing, controlled shutdown,
and the partition leadership that follows from them (sans-IO; time is passed in).

Theory of operation
-------------------
A broker registers (BrokerRegistration) and is *fenced* until it has replayed the metadata log
up to its own registration; it then heartbeats (BrokerHeartbeat) every
``broker.heartbeat.interval.ms``. A heartbeat from a fenced, caught-up broker that does not ask
to stay fenced unfences it, and offline partitions it may lead get it as leader. A broker not
heard from for ``broker.session.timeout.ms`` is fenced: it leaves every ISR (but the last
member of one) and partitions it led elect a new leader from the rest of their ISR. A
heartbeat asking to shut down starts a controlled shutdown: leadership and ISR membership move
away at once, and the broker is told it may exit (and is fenced) once it leads nothing.

Sessions live in the active controller's memory only: a controller that takes over gives every
registered, unfenced broker a fresh session, as Kafka's does.

A session only runs out on time the controller spent listening. The shell checks sessions every
fraction of a second; when its loop was busy elsewhere (applying a large batch of metadata,
opening logs) and a check comes more than ``ATTENTION_GAP_MS`` after the previous one, the time
past that gap is added to every session: a heartbeat the controller had no chance to process
cannot fence its broker (Kafka's controller likewise notes a heartbeat's arrival before its turn
in the event queue).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pylog.cluster.image import BrokerRegistration, MetadataImage
from pylog.cluster.partition_change import on_broker_unusable, on_broker_usable
from pylog.cluster.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from pylog.protocol.errors import ErrorCode

# checks of the sessions further apart than this mean the controller was not listening meanwhile
# (the shell checks twice as often)
ATTENTION_GAP_MS = 500


@dataclass(frozen=True)
class BrokerRegistrationResult:
    broker_id: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    broker_epoch: int = -1


@dataclass(frozen=True)
class BrokerHeartbeatResult:
    broker_id: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True)
class UnregisterBrokerResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


class BrokerSessions:
    """When each broker was last heard from, and the metadata offset its registration needs."""

    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._last: dict[int, int] = {}
        self._registered_at: dict[int, int] = {}
        self._heard: set[int] = set()  # brokers that contacted this controller since it took over
        self._checked_ms: int | None = None  # the previous check of the sessions

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last[broker_id] = now_ms
        self._heard.add(broker_id)

    def alive(self, broker_id: int, now_ms: int) -> bool:
        """The broker itself kept its session with this controller (a session granted at take-over
        does not count: the incarnation behind it may be the one registering again)."""
        last = self._last.get(broker_id)
        return broker_id in self._heard and last is not None and now_ms - last < self.session_timeout_ms

    def registered(self, broker_id: int, offset: int, now_ms: int) -> None:
        self._registered_at[broker_id] = offset
        self.touch(broker_id, now_ms)

    def caught_up(self, broker_id: int, metadata_offset: int) -> bool:
        return metadata_offset >= self._registered_at.get(broker_id, 0)

    def check(self, now_ms: int) -> list[int]:
        """The brokers whose session expired by ``now_ms``, counting only time the controller was
        listening: the part of the gap since the previous check beyond ``ATTENTION_GAP_MS`` is
        added to every session first."""
        if self._checked_ms is not None:
            deaf_ms = now_ms - self._checked_ms - ATTENTION_GAP_MS
            if deaf_ms > 0:
                self._last = {b: t + deaf_ms for b, t in self._last.items()}
        self._checked_ms = now_ms
        return self.expired(now_ms)

    def expired(self, now_ms: int) -> list[int]:
        return sorted(b for b, t in self._last.items() if now_ms - t >= self.session_timeout_ms)

    def forget(self, broker_id: int) -> None:
        self._last.pop(broker_id, None)
        self._heard.discard(broker_id)

    def reset(self, broker_ids: Sequence[int], now_ms: int) -> None:
        """A new active controller: every broker starts a full session now."""
        self._last = dict.fromkeys(broker_ids, now_ms)
        self._registered_at = {}
        self._heard = set()
        self._checked_ms = now_ms

    def next_deadline_ms(self) -> int | None:
        return min(self._last.values()) + self.session_timeout_ms if self._last else None


class BrokerControl:
    """Broker lifecycle commands over the controller's working image; ``emit`` applies and keeps
    the records it is given, in order."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        emit: Callable[[list[MetadataRecord]], None],
        sessions: BrokerSessions,
        *,
        unclean: Callable[[uuid.UUID], bool],
    ) -> None:
        self._image = image
        self._emit = emit
        self.sessions = sessions
        self._unclean = unclean

    def register(
        self,
        broker_id: int,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        *,
        now_ms: int,
        log_end_offset: int,
    ) -> BrokerRegistrationResult:
        image = self._image()
        if broker_id < 0:
            return BrokerRegistrationResult(broker_id, ErrorCode.INVALID_REQUEST, "Bad broker id")
        old = image.brokers.get(broker_id)
        if old is not None and old.incarnation_id == incarnation_id:
            return BrokerRegistrationResult(broker_id, broker_epoch=old.broker_epoch)
        if old is not None and not old.fenced and self.sessions.alive(broker_id, now_ms):
            return BrokerRegistrationResult(
                broker_id,
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                f"Another broker is registered with node id {broker_id} (incarnation "
                f"{old.incarnation_id}) and its session has not expired",
            )
        if old is not None and old.usable:
            self._make_unusable(old, fence=True)  # the old incarnation is gone
        epoch = image.last_broker_epoch + 1
        self._emit([RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True)])
        self.sessions.registered(broker_id, log_end_offset + 1, now_ms)
        return BrokerRegistrationResult(broker_id, broker_epoch=epoch)

    def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shutdown: bool,
        now_ms: int,
    ) -> BrokerHeartbeatResult:
        b = self._image().brokers.get(broker_id)
        if b is None:
            return BrokerHeartbeatResult(broker_id, ErrorCode.BROKER_ID_NOT_REGISTERED, "Not registered")
        if b.broker_epoch != broker_epoch:
            return BrokerHeartbeatResult(
                broker_id,
                ErrorCode.STALE_BROKER_EPOCH,
                f"Expected epoch {b.broker_epoch}, got {broker_epoch}",
            )
        self.sessions.touch(broker_id, now_ms)
        caught_up = self.sessions.caught_up(broker_id, metadata_offset)
        if want_shutdown:
            return self._controlled_shutdown(b, caught_up)
        if want_fence:
            if not b.fenced:
                self._make_unusable(b, fence=True)
        elif b.fenced and caught_up:
            unfence = BrokerRegistrationChangeRecord(
                broker_id, broker_epoch, fenced=False, in_controlled_shutdown=False
            )
            self._emit([unfence])
            self._on_usable(broker_id)
        now = self._image().brokers[broker_id]
        return BrokerHeartbeatResult(broker_id, is_caught_up=caught_up, is_fenced=now.fenced)

    def fence_expired(self, now_ms: int) -> list[int]:
        """Fence every unfenced broker whose session expired; returns their ids."""
        fenced = []
        for broker_id in self.sessions.check(now_ms):
            b = self._image().brokers.get(broker_id)
            self.sessions.forget(broker_id)
            if b is not None and not b.fenced:
                self._make_unusable(b, fence=True)
                fenced.append(broker_id)
        return fenced

    def unregister(self, broker_id: int) -> UnregisterBrokerResult:
        """UnregisterBroker: the broker leaves every ISR and leadership, then its registration goes.
        As in Kafka, a live broker may be unregistered too (it registers again if it keeps running);
        tools move its replicas away and stop it first."""
        b = self._image().brokers.get(broker_id)
        if b is None:
            return UnregisterBrokerResult(
                ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered"
            )
        image = self._image()
        usable = set(image.live_brokers()) - {broker_id}
        records: list[MetadataRecord] = []
        for topic in image.topics.values():
            for p in image.partitions(topic.topic_id).values():
                r = on_broker_unusable(p, broker_id, usable, self._unclean(topic.topic_id))
                if r is not None:
                    records.append(r)
        records.append(UnregisterBrokerRecord(broker_id, b.broker_epoch))
        self._emit(records)
        self.sessions.forget(broker_id)
        return UnregisterBrokerResult()

    # ------------------------------------------------------------------ internals

    def _controlled_shutdown(self, b: BrokerRegistration, caught_up: bool) -> BrokerHeartbeatResult:
        if b.fenced:
            return BrokerHeartbeatResult(
                b.broker_id, is_caught_up=caught_up, is_fenced=True, should_shut_down=True
            )
        if not b.in_controlled_shutdown:
            self._make_unusable(b, fence=False)
        done = not self._leads_anything(b.broker_id)
        if done:
            self._emit([BrokerRegistrationChangeRecord(b.broker_id, b.broker_epoch, fenced=True)])
            self.sessions.forget(b.broker_id)
        return BrokerHeartbeatResult(
            b.broker_id, is_caught_up=caught_up, is_fenced=done, should_shut_down=done
        )

    def _make_unusable(self, b: BrokerRegistration, *, fence: bool) -> None:
        change = BrokerRegistrationChangeRecord(
            b.broker_id,
            b.broker_epoch,
            fenced=True if fence else None,
            in_controlled_shutdown=None if fence else True,
        )
        self._emit([change])
        image = self._image()
        usable = set(image.live_brokers())
        records: list[MetadataRecord] = []
        for topic in image.topics.values():
            for p in image.partitions(topic.topic_id).values():
                r = on_broker_unusable(p, b.broker_id, usable, self._unclean(topic.topic_id))
                if r is not None:
                    records.append(r)
        self._emit(records)

    def _on_usable(self, broker_id: int) -> None:
        image = self._image()
        usable = set(image.live_brokers())
        records: list[MetadataRecord] = []
        for topic in image.topics.values():
            for p in image.partitions(topic.topic_id).values():
                r = on_broker_usable(p, broker_id, usable, self._unclean(topic.topic_id))
                if r is not None:
                    records.append(r)
        self._emit(records)

    def _leads_anything(self, broker_id: int) -> bool:
        image = self._image()
        return any(
            p.leader == broker_id
            for topic in image.topics.values()
            for p in image.partitions(topic.topic_id).values()
        )
