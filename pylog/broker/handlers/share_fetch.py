"""ShareFetch (KIP-932): acknowledge what the member sent, then acquire records for it.

Order of work, as in Kafka: advance the share session (epoch 0 opens, -1 closes, otherwise the
expected epoch), apply the piggy-backed acknowledgements, persist the share partitions they
changed, then (unless closing) read each session partition from its first available offset
through the partition read path (`Partition.read_wire`, the same bytes a Fetch returns) and
acquire the records of the batches read, up to `MaxRecords` (by whole log batches, Kafka's
batch-optimized mode) and the in-flight cap, handed out in `BatchSize` pieces; `MaxBytes` is a
soft limit (the first batch comes even if larger, 0 fetches nothing). A group whose
`share.isolation.level` is read_committed reads up to the last stable offset, and the batches
of aborted transactions are archived, never acquired, as control batches are. With nothing to
hand out the request waits, up to `MaxWaitMs`, for an append or a release, woken by events,
never by polling.

Version 2: `ShareAcquireMode` 1 (record_limit, KIP-1206) acquires exactly up to `MaxRecords`;
`IsRenewAck` (KIP-1222) allows RENEW (type 4) acknowledgements, which restart the acquisition
locks of the member's records, and such a request fetches nothing (its byte, record and wait
limits must be 0).

`share_fetch` takes its collaborators explicitly (share shell, metadata image, replicas).
"""

from __future__ import annotations

import asyncio
import functools
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ShareFetchRequest, ShareFetchResponse
from pylog.storage import OffsetOutOfRange, StorageError

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.producer_state import AbortedTxn
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.model import CONTROL_MASK
from pylog.share.partition import Acquired

_BATCH_HEAD = struct.Struct(
    ">qiibIhiqqq"
)  # base offset, length, leader epoch, magic, crc, attributes, last delta, timestamps, producer id
_TRANSACTIONAL = 0x10


BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1
ACQUIRE_MODES = (BATCH_OPTIMIZED, RECORD_LIMIT)
"""ShareAcquireMode (v2, KIP-1206): whole log batches up to MaxRecords, or exactly MaxRecords."""

DEFAULT_MAX_RECORDS = 500
"""MaxRecords when a request names none (the consumers' max.poll.records default)."""

Results = dict[tuple[uuid.UUID, int], ShareFetchResponse.PartitionData]
"""Each answered share partition's entry, by (topic id, partition)."""


def error_response(req: ShareFetchRequest, code: int) -> ShareFetchResponse:
    return ShareFetchResponse(
        error_code=0,
        responses=[
            ShareFetchResponse.ShareFetchableTopicResponse(
                topic_id=t.topic_id,
                partitions=[
                    ShareFetchResponse.PartitionData(
                        partition_index=p.partition_index,
                        error_code=code,
                        error_message=None,
                        current_leader=ShareFetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                        records=b"",
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


@serves(ApiKey.SHARE_FETCH, versions=(1, 2), error_response=error_response)
async def share_fetch_handler(
    ctx: RequestContext,
    req: ShareFetchRequest,
    *,
    share: ShareShell,
    metadata: MetadataView,
    replicas: ReplicaManager,
    node_id: int,
    stopping: Callable[[], bool],
) -> ShareFetchResponse:
    return await share_fetch(share, metadata.image, replicas, req, node_id, stopping)


async def share_fetch(
    shell: ShareShell | None,
    image: Any,
    replicas: Any,
    req: ShareFetchRequest,
    node_id: int,
    stopping: Callable[[], bool],
) -> ShareFetchResponse:
    if shell is None or shell.manager is None:
        return _top_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not req.group_id or not req.member_id:
        return _top_error(ErrorCode.INVALID_REQUEST)
    if req.share_acquire_mode not in ACQUIRE_MODES:
        return _top_error(ErrorCode.INVALID_REQUEST)
    renew = req.is_renew_ack
    if renew and (req.max_bytes, req.min_bytes, req.max_records, req.max_wait_ms) != (0, 0, 0, 0):
        return _top_error(ErrorCode.INVALID_REQUEST)  # KIP-1222: a renewing request fetches nothing
    if await shell.ensure_topic() is not ErrorCode.NONE:
        return _top_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    manager = shell.manager
    group, member = req.group_id, req.member_id
    epoch = req.share_session_epoch
    requested = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    acks = [
        (t.topic_id, p.partition_index, p.acknowledgement_batches)
        for t in req.topics
        for p in t.partitions
        if p.acknowledgement_batches
    ]
    if epoch == 0 and acks:
        return _top_error(ErrorCode.INVALID_REQUEST)
    error, session = manager.session_step(group, member, epoch, requested, forgotten)
    if error is not ErrorCode.NONE or session is None:
        return _top_error(error)
    results: Results = {}
    for tid, p, batches in acks:
        error = acknowledge(shell, image, group, member, tid, p, batches, renew=renew)
        results[(tid, p)] = _entry(p, node_id, ack_error=error)
    if shell.persist() is not ErrorCode.NONE:
        for e in results.values():
            e.acknowledge_error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if epoch == -1:
        manager.close_session(group, member)
        shell.persist()
        shell.notify()
        return _response(shell, results, group)
    if renew:  # the renewed locks run from now: no waiting for records
        shell.reschedule()
        return _response(shell, results, group)
    targets = list(session.partitions) if epoch != 0 else requested
    max_records = req.max_records if req.max_records > 0 else DEFAULT_MAX_RECORDS
    batch_size = req.batch_size if req.batch_size > 0 else max_records
    record_limit = req.share_acquire_mode == RECORD_LIMIT
    limits = FetchLimits(max_records, batch_size, max(req.max_bytes, 0), record_limit)
    acquire = functools.partial(
        _acquire_all, shell, image, replicas, group, member, targets, limits, results, node_id
    )
    if not acquire() and req.max_wait_ms > 0 and targets:
        await _wait(shell, _watched(image, replicas, targets), acquire, req.max_wait_ms, stopping)
    shell.persist()  # first start offsets of new share partitions
    if epoch == 0:
        for tid, p in requested:
            results.setdefault((tid, p), _entry(p, node_id))
    return _response(shell, results, group)


def acknowledge(
    shell: ShareShell,
    image: Any,
    group: str,
    member: str,
    tid: uuid.UUID,
    p: int,
    batches: Any,
    *,
    renew: bool = False,
) -> ErrorCode:
    """Apply one partition's acknowledgements. A partition no longer in the metadata (its topic
    was deleted) answers UNKNOWN_TOPIC_OR_PARTITION, as Kafka's does; RENEW needs `renew`
    (the request's IsRenewAck)."""
    if image.partition(tid, p) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    key = (group, tid, p)
    if (e := shell.key_error(key)) is not ErrorCode.NONE:
        return e
    assert shell.manager is not None
    return shell.manager.acknowledge(
        key,
        member,
        [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches],
        shell.clock(),
        renew=renew,
    )


@dataclass(frozen=True)
class FetchLimits:
    """What one ShareFetch may acquire: `max_records` (whole log batches in batch-optimized mode,
    exactly in record-limit mode), `batch_size` (the AcquiredRecords piece size) and `max_bytes`
    (a soft limit: the first batch comes even if larger; 0 fetches nothing)."""

    max_records: int
    batch_size: int
    max_bytes: int
    record_limit: bool = False


def _acquire_all(
    shell: ShareShell,
    image: Any,
    replicas: Any,
    group: str,
    member: str,
    targets: list,
    limits: FetchLimits,
    results: Results,
    node_id: int,
) -> int:
    total = 0
    budget = limits.max_bytes
    names = image.topics_by_id
    now = shell.clock()
    committed = shell.read_committed(group)
    for tid, p in targets:
        if total >= limits.max_records or budget <= 0:
            break
        topic = names.get(tid)
        part = replicas.get(topic.name, p) if topic is not None else None
        if part is None:
            missing = results.setdefault((tid, p), _entry(p, node_id))
            missing.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic else ErrorCode.UNKNOWN_TOPIC_ID
            continue
        key = (group, tid, p)
        if shell.key_error(key) is not ErrorCode.NONE:
            continue
        assert shell.manager is not None
        sp = shell.manager.partition(key, functools.partial(_initial_offset, shell, group, part))
        sp.move_start(part.log_start_offset)
        if sp.expire(now)[0]:  # locks that ran out are gone, whether or not the timer has fired
            shell.manager.dirty.add(key)
        offset = sp.next_fetch_offset()
        limit = part.last_stable_offset if committed else part.high_watermark
        if offset is None or offset >= limit:
            continue
        try:
            batches = part.read_wire(offset, budget, limit)
        except (OffsetOutOfRange, StorageError):
            continue
        spans = [_span(b) for b in batches]
        aborted = _aborted_batches(spans, part.aborted_transactions(offset, batches)) if committed else set()
        data = [(first, last) for first, last, control, _pid in spans if not control and first not in aborted]
        skipped = [(first, last) for first, last, control, _pid in spans if control or first in aborted]
        acquired = sp.acquire(
            member,
            data,
            limits.max_records - total,
            now,
            skipped,
            whole_batches=not limits.record_limit,
            batch_size=limits.batch_size,
        )
        if skipped:
            shell.manager.dirty.add(key)  # archived offsets: the start offset may have moved
        if not acquired:
            continue
        last_acquired = acquired[-1].last_offset
        wire = [b for b, sp_ in zip(batches, spans) if sp_[0] <= last_acquired and sp_[0] not in aborted]
        entry = results.setdefault((tid, p), _entry(p, node_id))
        entry.records = wire
        entry.acquired_records = [_acquired(a) for a in acquired]
        total += sum(a.last_offset - a.first_offset + 1 for a in acquired)
        budget -= sum(len(b) for b in wire)
    if total:
        shell.reschedule()  # lock deadlines
    return total


Span = tuple[int, int, bool, int]
"""(first offset, last offset, is a control batch, producer id if transactional else -1)."""


def _span(batch: bytes) -> Span:
    base, _len, _epoch, _magic, _crc, attrs, last_delta, _t0, _t1, pid = _BATCH_HEAD.unpack_from(batch, 0)
    return base, base + last_delta, bool(attrs & CONTROL_MASK), pid if attrs & _TRANSACTIONAL else -1


def _aborted_batches(spans: list[Span], aborted: list[AbortedTxn]) -> set[int]:
    """First offsets of the data batches that belong to aborted transactions (Kafka's SharePartition
    archives them for a read_committed group): a transactional batch of producer P lying between
    an aborted transaction of P's first offset and its ABORT marker. Per batch, not per record."""
    if not aborted:
        return set()
    by_producer: dict[int, list[AbortedTxn]] = {}
    for a in aborted:
        by_producer.setdefault(a.producer_id, []).append(a)
    return {
        first
        for first, _last, control, pid in spans
        if not control and pid >= 0
        and any(a.first_offset <= first < a.last_offset for a in by_producer.get(pid, ()))
    }


def _watched(image: Any, replicas: Any, targets: list) -> list[Partition]:
    """The local partitions among `targets`, whose appends may end a wait."""
    names = image.topics_by_id
    watched = []
    for tid, p in targets:
        topic = names.get(tid)
        part = replicas.get(topic.name, p) if topic is not None else None
        if part is not None:
            watched.append(part)
    return watched


async def _wait(
    shell: ShareShell,
    watched: list[Partition],
    acquire: Callable[[], int],
    max_wait_ms: int,
    stopping: Callable[[], bool],
) -> None:
    """Until `acquire` gets records (tried again on each append to a watched partition and each
    share-state change), the wait runs out, or the broker stops."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000.0
    current: list[asyncio.Future] = []
    expired: list[bool] = []

    def wake() -> None:
        if current and not current[-1].done():
            current[-1].set_result(None)

    def expire() -> None:
        expired.append(True)  # the timer may run a little before loop.time() reaches the deadline
        wake()

    timer = loop.call_at(deadline, expire)
    try:
        while not expired and not stopping():
            current[:] = [loop.create_future()]
            for part in watched:
                part.watchers.add_fetch(wake)
            shell.add_waiter(wake)
            try:
                await current[-1]
            finally:
                for part in watched:
                    part.watchers.remove_fetch(wake)
                shell.remove_waiter(wake)
            if acquire():
                return
    finally:
        timer.cancel()


def _acquired(a: Acquired) -> ShareFetchResponse.AcquiredRecords:
    return ShareFetchResponse.AcquiredRecords(
        first_offset=a.first_offset, last_offset=a.last_offset, delivery_count=a.delivery_count
    )


def _initial_offset(shell: ShareShell, group: str, part: Partition) -> int:
    """Where `group` starts on `part`, read when its share partition is first made."""
    return shell.initial_offset(group, part, shell.clock())


def _entry(p: int, node_id: int, ack_error: ErrorCode = ErrorCode.NONE) -> ShareFetchResponse.PartitionData:
    return ShareFetchResponse.PartitionData(
        partition_index=p,
        error_code=ErrorCode.NONE,
        error_message=None,
        acknowledge_error_code=ack_error,
        acknowledge_error_message=None,
        current_leader=ShareFetchResponse.LeaderIdAndEpoch(leader_id=node_id, leader_epoch=0),
        records=b"",
        acquired_records=[],
    )


def _response(shell: ShareShell, results: Results, group: str) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchResponse.PartitionData]] = {}
    for (tid, _p), entry in results.items():
        by_topic.setdefault(tid, []).append(entry)
    return ShareFetchResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        acquisition_lock_timeout_ms=shell.share_config_of(group).lock_duration_ms,
        responses=[
            ShareFetchResponse.ShareFetchableTopicResponse(topic_id=tid, partitions=parts)
            for tid, parts in by_topic.items()
        ],
        node_endpoints=[],
    )


def _top_error(error: ErrorCode) -> ShareFetchResponse:
    return ShareFetchResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=error.name,
        acquisition_lock_timeout_ms=0,
        responses=[],
        node_endpoints=[],
    )
