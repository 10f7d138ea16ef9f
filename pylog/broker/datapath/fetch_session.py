"""Incremental fetch sessions, the broker's side (KIP-227; Kafka's FetchManager, FetchSession,
FetchSessionCache): a fetcher that holds a session names only the partitions whose fetch position
changed, and is answered only the partitions that have something new.

Theory of operation. A Fetch carries ``(session_id, session_epoch)``:

- ``(0, -1)``: a sessionless full fetch (librdkafka, old clients); answered with session id 0.
- ``(0, 0)``: a full fetch that asks for a session. The answer names every requested partition
  and the new session id (``create``; 0 when the cache has no room). The session remembers each
  partition's fetch position (offset, max bytes, leader epoch, last fetched epoch, the fetcher's
  log start) and what was last answered (high watermark, last stable offset, log start offset).
- ``(X, -1)`` / ``(X, 0)``: session X is closed, then as above.
- ``(X, N > 0)``: incremental. X must exist (else FETCH_SESSION_ID_NOT_FOUND) and be at epoch N
  (else INVALID_FETCH_SESSION_EPOCH). The request's partitions are added to or updated in the
  session, its ``forgotten_topics_data`` removed; then every partition of the session is fetched
  from its remembered position, and the answer carries only those that ``must_respond``: records,
  an error, a moved high watermark / last stable offset / log start offset, a preferred read
  replica or a diverging epoch. A partition answered with records moves to the end of the
  session's order, so a busy partition does not starve the others of the byte budget. The epoch
  advances once per accepted request (``pylog.client.fetch_session.next_epoch``, wrapping to 1
  past 2**31-1); if it moved again before the answer was built (a duplicate request), the
  answer is INVALID_FETCH_SESSION_EPOCH.

A session belongs to its fetcher: a follower's (``privileged``) is used and closed only by the
same replica id, a consumer's by any consumer that holds the id.

Eviction, as Kafka's ``tryEvict``: the cache holds ``max.incremental.fetch.session.cache.slots``
sessions. When full, a new session may take the place of (1) the least recently used session if
it has been unused for longer than ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``, else (2) the
least valuable evictable session if the newcomer is worth at least as much, valued by (privileged,
partition count, id): a follower's session outranks any consumer's, a bigger one a smaller one. A
session younger than the eviction time is evictable only by a privileged newcomer, and only if it
is not privileged itself.

This module is a core: no I/O, no clock (``now`` is passed in, in milliseconds of a monotonic
clock); session ids come from the ``random.Random`` it is given.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pylog.protocol.errors import ErrorCode

from pylog.broker.datapath.fetch_params import CONSUMER, FetchPartitionData, PartitionFetch
from pylog.client.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, MAX_EPOCH, next_epoch
from pylog.replication.replica_selector import NO_PREFERENCE

# Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a broker config there either)
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000

TopicPartition = tuple[str, int]


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a session: the fetcher's position (a ``PartitionFetch``, fetched as is)
    and what the last answer told it (Kafka's CachedPartition)."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int  # the fetcher's (a follower's log start), as the request names it
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1  # this broker's log start, as last answered

    @classmethod
    def of(cls, topic: str, w: PartitionFetch) -> CachedPartition:
        return cls(topic, w.partition, w.fetch_offset, w.partition_max_bytes, w.current_leader_epoch,
                   w.last_fetched_epoch, w.log_start_offset)

    def update_request(self, w: PartitionFetch) -> None:
        self.fetch_offset = w.fetch_offset
        self.partition_max_bytes = w.partition_max_bytes
        self.current_leader_epoch = w.current_leader_epoch
        self.last_fetched_epoch = w.last_fetched_epoch
        self.log_start_offset = w.log_start_offset

    def must_respond(self, d: FetchPartitionData) -> bool:
        """Whether an incremental answer carries this partition (Kafka's
        maybeUpdateResponseData), remembering the offsets it answers. An error resets the
        remembered high watermark, so the partition is sent again once the error is gone."""
        respond = (bool(d.records) or d.preferred_read_replica != NO_PREFERENCE
                   or d.diverging_epoch is not None)
        if self.high_watermark != d.high_watermark:
            respond = True
            self.high_watermark = d.high_watermark
        if self.last_stable_offset != d.last_stable_offset:
            respond = True
            self.last_stable_offset = d.last_stable_offset
        if self.local_log_start_offset != d.log_start_offset:
            respond = True
            self.local_log_start_offset = d.log_start_offset
        if d.error:
            respond = True
            self.high_watermark = -1
        return respond

    def remember(self, d: FetchPartitionData) -> None:
        """What a full fetch answered (the session starts from it)."""
        self.high_watermark = -1 if d.error else d.high_watermark
        self.last_stable_offset = d.last_stable_offset
        self.local_log_start_offset = d.log_start_offset


@dataclass(eq=False)
class FetchSession:
    id: int
    owner: int  # a follower's replica id, or CONSUMER
    partitions: dict[TopicPartition, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next incremental fetch must carry

    @property
    def privileged(self) -> bool:
        """A follower's session (Kafka lets it evict consumers' sessions)."""
        return self.owner >= 0

    def value(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: the lowest is evicted first."""
        return (self.privileged, len(self.partitions), self.id)

    def owned_by(self, replica_id: int) -> bool:
        return self.owner == replica_id if self.privileged else replica_id < 0

    def update(
        self, wanted: Sequence[tuple[str, PartitionFetch]], forgotten: Iterable[TopicPartition]
    ) -> None:
        """An incremental request: add or update its partitions, then drop the forgotten ones."""
        parts = self.partitions
        for topic, w in wanted:
            cached = parts.get((topic, w.partition))
            if cached is None:
                parts[(topic, w.partition)] = CachedPartition.of(topic, w)
            else:
                cached.update_request(w)
        for tp in forgotten:
            parts.pop(tp, None)


class FetchKind:
    SESSIONLESS = "sessionless"  # a full fetch answered with session id 0
    FULL = "full"  # a full fetch that creates a session at answer time
    INCREMENTAL = "incremental"
    ERROR = "error"  # answered with a top-level session error and no partitions


@dataclass(eq=False)
class FetchContext:
    """What one Fetch request reads and how its answer is built (Kafka's FetchContext)."""

    kind: str
    wanted: Sequence[tuple[str, PartitionFetch]] = field(default_factory=list)
    error: int = 0
    session: FetchSession | None = None
    epoch: int = 0  # an incremental context's session epoch once accepted


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's FetchSessionCache and FetchManager)."""

    def __init__(self, max_entries: int, eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_entries = max(max_entries, 0)
        self.eviction_ms = eviction_ms
        self._rng = rng if rng is not None else random.Random()
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    # --- a request --------------------------------------------------------------------------

    def new_context(
        self,
        session_id: int,
        epoch: int,
        replica_id: int,
        wanted: Sequence[tuple[str, PartitionFetch]],
        forgotten: Iterable[TopicPartition],
        now: int,
    ) -> FetchContext:
        """The context of a Fetch carrying ``(session_id, epoch)`` from ``replica_id`` (CONSUMER
        for a consumer): see the module docstring."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                old = self.sessions.get(session_id)
                if old is not None and old.owned_by(replica_id):
                    self.remove(session_id)
            kind = FetchKind.SESSIONLESS if epoch == FINAL_EPOCH else FetchKind.FULL
            return FetchContext(kind, list(wanted))
        session = self.sessions.get(session_id)
        if session is None or not session.owned_by(replica_id):
            return FetchContext(FetchKind.ERROR, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(FetchKind.ERROR, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.update(wanted, forgotten)
        if not session.partitions:
            self.remove(session.id)
            return FetchContext(FetchKind.SESSIONLESS, list(wanted))
        session.last_used_ms = now
        session.epoch = next_epoch(session.epoch)
        parts = [(c.topic, c) for c in session.partitions.values()]
        return FetchContext(FetchKind.INCREMENTAL, parts, session=session, epoch=session.epoch)

    def create(
        self,
        replica_id: int,
        wanted: Sequence[tuple[str, PartitionFetch]],
        answers: Sequence[FetchPartitionData],
        now: int,
    ) -> int:
        """A full fetch's session, from what it asked and was answered: its id, or
        INVALID_SESSION_ID when the cache has no room (Kafka's maybeCreateSession)."""
        privileged = replica_id >= 0
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, len(wanted), now):
            return INVALID_SESSION_ID
        parts: dict[TopicPartition, CachedPartition] = {}
        for (topic, w), d in zip(wanted, answers, strict=True):
            cached = CachedPartition.of(topic, w)
            cached.remember(d)
            parts[(topic, w.partition)] = cached
        session = FetchSession(self._new_id(), replica_id if privileged else CONSUMER, parts, now, now)
        self.sessions[session.id] = session
        return session.id

    def incremental_answer(
        self, context: FetchContext, answers: Sequence[FetchPartitionData]
    ) -> list[tuple[str, int, FetchPartitionData]] | None:
        """The partitions an incremental answer carries, in session order (those with records
        then move to the end); None when the session moved on meanwhile (a duplicate request:
        INVALID_FETCH_SESSION_EPOCH) or is gone."""
        session = context.session
        assert session is not None
        if self.sessions.get(session.id) is not session or session.epoch != context.epoch:
            return None
        out = []
        parts = session.partitions
        for (topic, w), d in zip(context.wanted, answers, strict=True):
            cached = w
            assert isinstance(cached, CachedPartition)
            key = (topic, cached.partition)
            if parts.get(key) is not cached or not cached.must_respond(d):
                continue
            out.append((topic, cached.partition, d))
            if d.records:
                del parts[key]
                parts[key] = cached
        return out

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    # --- eviction ----------------------------------------------------------------------------

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session of ``size`` partitions (Kafka's tryEvict)."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        evictable = [
            s for s in self.sessions.values()
            if now - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not evictable:
            return False
        victim = min(evictable, key=FetchSession.value)
        if (privileged, size, 0) < victim.value():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        self.evictions += 1

    def _new_id(self) -> int:
        while True:
            sid = self._rng.randint(1, MAX_EPOCH - 1)
            if sid not in self.sessions:
                return sid
