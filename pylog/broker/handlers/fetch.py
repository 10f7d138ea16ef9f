"""Fetch: read record batches, long-polling on max_wait_ms / min_bytes (``ReplicaManager.fetch_messages``).

read_committed fetches (isolation level 1) stop at the last stable offset and list the aborted
transactions overlapping the returned batches, so the consumer skips their records.

A fetch may hold a session (KIP-227, ``pylog.broker.datapath.fetch_session``): a full fetch
names every partition and is answered every one; an incremental one names only
what changed since and is answered only the session's partitions that have
something new, though all of them are read (and waited on) from their remembered
positions. Each partition returns whole batches starting with the one that
holds the fetch offset. Sizes follow Kafka's ReplicaManager: the response is
filled up to the request's ``max_bytes`` across partitions, each partition also
bounded by its ``partition_max_bytes``; only the first batch of the first
partition that returns anything may exceed those limits (so a consumer always
progresses), and a later partition whose first batch does not fit what is left
returns nothing this time. A waiting fetch registers a callback on its
partitions: a follower's fires when the log grows, a consumer's when the high
watermark moves (not on every append, which it could not read yet); the fetch
is rebuilt once per wake-up, never on a timer loop.

Followers' fetches and consumers' before v11 are answered by the leader only,
and only for the leader epoch the fetcher holds (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH otherwise; NOT_LEADER_OR_FOLLOWER with the current leader
where the version has the field). A consumer's v11+ fetch may be served by a
follower too, up to that follower's high watermark; the leader may answer it
with a ``preferred_read_replica`` in the consumer's rack (KIP-392). Consumers read up to
the high watermark (the last stable offset for read_committed); a follower's
fetch (replica id >= 0) reads up to the log end, and its fetch offset is its log
end, which moves the high watermark and may bring it back into the ISR. A
follower whose last fetched epoch ends earlier in the leader's log is told where
(diverging epoch) and truncates.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import FetchRequest, FetchResponse, Records

from pylog.broker.access.authorization import Authorization
from pylog.broker.datapath.fetch_session import FetchContext, FetchKind, FetchSessionCache
from pylog.broker.datapath.isr_manager import IsrManager
from pylog.broker.datapath.replica_manager import (
    CONSUMER,
    FetchIsolation,
    FetchParams,
    FetchPartitionData,
    ReplicaManager,
)
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation, ResourceType

log = logging.getLogger(__name__)

READ_COMMITTED = 1
SESSION_VERSION = 7  # the first Fetch version with session_id / session_epoch (KIP-227)
RACK_VERSION = 11  # the first Fetch version with rack_id and preferred_read_replica (KIP-392)


def error_response(req: FetchRequest, code: int) -> FetchResponse:
    return FetchResponse(
        error_code=0,
        session_id=0,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic=t.topic,
                partitions=[
                    FetchResponse.PartitionData(
                        partition_index=p.partition, error_code=code, high_watermark=-1, records=b""
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


@serves(ApiKey.FETCH, versions=(0, 12), error_response=error_response)
def fetch(
    ctx: RequestContext,
    req: FetchRequest,
    *,
    replicas: ReplicaManager,
    isr: IsrManager,
    stopping: Callable[[], bool],
    sessions: FetchSessionCache,
    monotonic_ms: Callable[[], int],
    authz: Authorization,
) -> Any:
    replica_id = _replica_id(req)
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif getattr(req, "isolation_level", 0) == READ_COMMITTED:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    # Fetch v11+ carries the consumer's rack (Kafka's ClientMetadata): any replica may serve it
    client_rack = (getattr(req, "rack_id", "") or "") if ctx.api_version >= RACK_VERSION else None
    params = FetchParams(replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes, isolation, client_rack)
    wanted = [(t.topic, p) for t in req.topics for p in t.partitions]
    if ctx.api_version >= SESSION_VERSION:
        forgotten = [(f.topic, i) for f in req.forgotten_topics_data or () for i in f.partitions]
        context = sessions.new_context(
            req.session_id, req.session_epoch, replica_id, wanted, forgotten, monotonic_ms()
        )
    else:
        context = FetchContext(FetchKind.SESSIONLESS, wanted)
    if context.kind == FetchKind.ERROR:
        return FetchResponse(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    read = context.wanted
    denied = _denied_topics(ctx, authz, context) if replica_id < 0 else set()
    if denied:
        read = [(t, w) for t, w in read if t not in denied]
    answer = replicas.fetch_messages(params, read, expand_isr=isr.maybe_expand, stopping=stopping)
    respond = functools.partial(_answer, context, sessions, monotonic_ms, replica_id,
                                isolation is FetchIsolation.TXN_COMMITTED, denied)
    if isinstance(answer, list):
        return respond(answer)
    return _respond_later(answer, respond)


async def _respond_later(
    answer: Awaitable[list[FetchPartitionData]], respond: Callable[[list[FetchPartitionData]], FetchResponse]
) -> FetchResponse:
    return respond(await answer)


def _denied_topics(ctx: RequestContext, authz: Authorization, context: FetchContext) -> set[str]:
    """The topics of an incremental fetch's session that the consumer may no longer READ: its
    request names only what changed, so the session's other topics are checked here (the ACL
    rule of the handler table checked the topics the request names)."""
    if context.kind != FetchKind.INCREMENTAL or not authz.enabled:
        return set()
    topics = {t for t, _ in context.wanted}
    return topics - authz.filter(ctx, AclOperation.READ, ResourceType.TOPIC, topics)


def _replica_id(req: FetchRequest) -> int:
    """The fetching replica (a follower), or CONSUMER."""
    replica_id = getattr(req, "replica_id", CONSUMER)
    if replica_id < 0:
        replica_state = getattr(req, "replica_state", None)
        replica_id = replica_state.replica_id if replica_state is not None else CONSUMER
    return replica_id


def _answer(
    context: FetchContext,
    sessions: FetchSessionCache,
    monotonic_ms: Callable[[], int],
    replica_id: int,
    committed: bool,
    denied: set[str],
    answer: list[FetchPartitionData],
) -> FetchResponse:
    """The response of a context: every partition read (a full fetch, creating its session if it
    asked for one), or only those that changed (an incremental fetch)."""
    if denied:  # not read: answered TOPIC_AUTHORIZATION_FAILED in their place
        read = iter(answer)
        answer = [
            FetchPartitionData(ErrorCode.TOPIC_AUTHORIZATION_FAILED) if t in denied else next(read)
            for t, _ in context.wanted
        ]
    if context.kind == FetchKind.INCREMENTAL:
        changed = sessions.incremental_answer(context, answer)
        assert context.session is not None
        if changed is None:
            return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                                 session_id=context.session.id, responses=[])
        return _response(((t, i, d) for t, i, d in changed), committed, context.session.id)
    session_id = 0
    if context.kind == FetchKind.FULL:
        session_id = sessions.create(replica_id, context.wanted, answer, monotonic_ms())
        if replica_id >= 0:  # a follower's: one per leader it fetches from, kept while it follows
            log.info("replica %d opened fetch session %d (%d partitions)", replica_id, session_id,
                     len(context.wanted))
    entries = ((t, w.partition, d) for (t, w), d in zip(context.wanted, answer, strict=True))
    return _response(entries, committed, session_id)


def _response(
    entries: Iterable[tuple[str, int, FetchPartitionData]], committed: bool, session_id: int
) -> FetchResponse:
    """Partitions grouped by topic, topics in the order they first appear."""
    by_topic: dict[str, list[FetchResponse.PartitionData]] = {}
    for topic, index, d in entries:
        partitions = by_topic.get(topic)
        if partitions is None:
            partitions = by_topic[topic] = []
        partitions.append(_partition(index, d, committed))
    topics = [FetchResponse.FetchableTopicResponse(topic=t, partitions=ps) for t, ps in by_topic.items()]
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics)


def _partition(index: int, d: FetchPartitionData, committed: bool) -> FetchResponse.PartitionData:
    entry = FetchResponse.PartitionData(
        partition_index=index,
        error_code=d.error,
        high_watermark=d.high_watermark,
        last_stable_offset=d.last_stable_offset,
        log_start_offset=d.log_start_offset,
        aborted_transactions=None,
        preferred_read_replica=d.preferred_read_replica,
        records=cast("Records", d.records or b""),
    )
    if committed:
        aborted = d.aborted_transactions or ()
        entry.aborted_transactions = [
            FetchResponse.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in aborted
        ]
    if d.current_leader is not None:
        entry.current_leader = FetchResponse.LeaderIdAndEpoch(
            leader_id=d.current_leader[0], leader_epoch=d.current_leader[1]
        )
    if d.diverging_epoch is not None:
        entry.diverging_epoch = FetchResponse.EpochEndOffset(
            epoch=d.diverging_epoch[0], end_offset=d.diverging_epoch[1]
        )
    return entry
