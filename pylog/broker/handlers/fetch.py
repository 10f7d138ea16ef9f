"""Fetch: read record batches, long-polling on max_wait_ms / min_bytes.

read_committed fetches (isolation level 1) stop at the last stable offset and list the aborted
transactions overlapping the returned batches, so the consumer skips their records.

Fetch sessions are declined (session id 0), so every requested partition is in
every answer. Each partition returns whole batches starting with the one that
holds the fetch offset. Sizes follow Kafka's ReplicaManager: the response is
filled up to the request's ``max_bytes`` across partitions, each partition also
bounded by its ``partition_max_bytes``; only the first batch of the first
partition that returns anything may exceed those limits (so a consumer always
progresses), and a later partition whose first batch does not fit what is left
returns nothing this time. A waiting fetch registers a callback on its
partitions: a follower's fires when the log grows, a consumer's when the high
watermark moves (not on every append, which it could not read yet); the fetch
is rebuilt once per wake-up, never on a timer loop.

Only the leader answers, and only for the leader epoch the fetcher holds
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH otherwise; NOT_LEADER_OR_FOLLOWER
with the current leader where the version has the field). Consumers read up to
the high watermark (the last stable offset for read_committed); a follower's
fetch (replica id >= 0) reads up to the log end, and its fetch offset is its log
end, which moves the high watermark and may bring it back into the ISR. A
follower whose last fetched epoch ends earlier in the leader's log is told where
(diverging epoch) and truncates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.storage import OffsetOutOfRange, StorageError

from pylog.broker.context import RequestContext
from pylog.broker.isr_manager import IsrManager
from pylog.broker.partition import Partition
from pylog.broker.registry import serves
from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.transactions import aborted_for_fetch

log = logging.getLogger(__name__)

READ_COMMITTED = 1
CONSUMER = -1


@serves(ApiKey.FETCH, versions=(0, 12))
def fetch(
    ctx: RequestContext,
    req: Any,
    *,
    replicas: ReplicaManager,
    isr: IsrManager,
    stopping: Callable[[], bool],
) -> Any:
    response, nbytes, errors = _build(replicas, isr, req, ctx.now_ms())
    if req.max_wait_ms <= 0 or nbytes >= max(req.min_bytes, 1) or errors:
        return response
    return _wait(replicas, isr, stopping, req, ctx)


def _build(replicas: ReplicaManager, isr: IsrManager, req: Any, now_ms: int) -> tuple[dict, int, bool]:
    replica_id = _replica_id(req)
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    budget = max(req.max_bytes, 0)  # versions below 4 (no max_bytes) are refused, as Kafka 4 does
    min_one = True  # until a partition returns data, its first batch may exceed the limits
    total = 0
    errors = False
    topics = []
    for t in req.topics:
        name = t.topic
        parts = replicas.topic_partitions(name)
        out = []
        for p in t.partitions:
            part = parts.get(p.partition)
            if part is None:
                out.append(_empty(p.partition, replicas.absent_error(name, p.partition), committed))
                errors = True
                continue
            if replica_id >= 0:
                entry, size = _read_for_follower(
                    part, p, replica_id, isr, now_ms, max(budget - total, 0), min_one
                )
            else:
                entry, size = _read_partition(part, p, committed, max(budget - total, 0), min_one)
            if entry["error_code"]:
                errors = True
            if size:
                min_one = False
            total += size
            out.append(entry)
        topics.append({"topic": name, "partitions": out})
    response = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}
    return response, total, errors


def _replica_id(req: Any) -> int:
    """The fetching replica (a follower), or CONSUMER."""
    replica_id = getattr(req, "replica_id", CONSUMER)
    if replica_id < 0:
        replica_state = getattr(req, "replica_state", None)
        replica_id = replica_state.replica_id if replica_state is not None else CONSUMER
    return replica_id


def _leadership_error(part: Partition, p: Any, entry: dict) -> int:
    """Why this replica cannot answer a fetch for ``p`` (0: it can), filling ``current_leader``."""
    if not part.is_leader:
        entry["current_leader"] = {"leader_id": part.leader_id, "leader_epoch": part.leader_epoch}
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    epoch = getattr(p, "current_leader_epoch", -1)
    if epoch >= 0 and epoch < part.leader_epoch:
        entry["current_leader"] = {"leader_id": part.leader_id, "leader_epoch": part.leader_epoch}
        return ErrorCode.FENCED_LEADER_EPOCH
    if epoch > part.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return 0


def _read_for_follower(
    part: Partition, p: Any, replica_id: int, isr: IsrManager, now_ms: int, budget: int, min_one: bool
) -> tuple[dict, int]:
    entry = _empty(p.partition, 0, False)
    error = _leadership_error(part, p, entry)
    if not error and replica_id not in part.replicas:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if error:
        entry["error_code"] = error
        return entry, 0
    offset = p.fetch_offset
    last_epoch = getattr(p, "last_fetched_epoch", -1)
    if last_epoch >= 0:
        epoch, end = part.log.end_offset_for_epoch(last_epoch)
        if epoch != last_epoch or end < offset:
            entry.update(_offsets(part))
            entry["diverging_epoch"] = {"epoch": epoch, "end_offset": end}
            return entry, 0
    if part.log_start_offset <= offset <= part.log_end_offset:
        part.on_follower_fetch(replica_id, offset, now_ms, getattr(p, "log_start_offset", -1))
        isr.maybe_expand(part, replica_id)
    entry.update(_offsets(part))
    if offset < part.log_start_offset or offset > part.log_end_offset:
        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        return entry, 0
    limit = max(min(p.partition_max_bytes, budget), 0)
    if limit == 0 and not min_one:
        return entry, 0
    try:
        batches = part.read_wire(offset, limit, part.log_end_offset, min_one=min_one)
    except OffsetOutOfRange:
        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        entry["log_start_offset"] = part.log_start_offset
        return entry, 0
    except StorageError as exc:
        log.error("reading %s-%d failed: %s", part.topic, part.index, exc)
        entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return entry, 0
    if not batches:
        return entry, 0
    entry["records"] = batches
    return entry, sum(len(b) for b in batches)


def _offsets(part: Partition) -> dict[str, int]:
    hw = part.high_watermark
    return {
        "high_watermark": hw,
        "last_stable_offset": part.last_stable_offset,
        "log_start_offset": part.log_start_offset,
    }


def _read_partition(part: Partition, p: Any, committed: bool, budget: int, min_one: bool) -> tuple[dict, int]:
    leadership = _empty(p.partition, 0, committed)
    error = _leadership_error(part, p, leadership)
    if error:
        leadership["error_code"] = error
        return leadership, 0
    hw = part.high_watermark
    lso = part.last_stable_offset
    start = part.log_start_offset
    offset = p.fetch_offset
    entry = {
        "partition_index": p.partition,
        "error_code": 0,
        "high_watermark": hw,
        "last_stable_offset": lso,
        "log_start_offset": start,
        "aborted_transactions": [] if committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    if offset < start or offset > part.log_end_offset:
        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        return entry, 0
    limit = max(min(p.partition_max_bytes, budget), 0)
    if limit == 0 and not min_one:
        return entry, 0
    try:
        batches = part.read_wire(offset, limit, lso if committed else hw, min_one=min_one)
    except OffsetOutOfRange:  # retention or DeleteRecords moved the log start meanwhile
        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
        entry["log_start_offset"] = part.log_start_offset
        return entry, 0
    except StorageError as exc:
        log.error("reading %s-%d failed: %s", part.topic, part.index, exc)
        entry["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return entry, 0
    if not batches:
        return entry, 0
    entry["records"] = batches
    if committed:
        entry["aborted_transactions"] = aborted_for_fetch(part, offset, batches)
    return entry, sum(len(b) for b in batches)


def _empty(index: int, code: int, committed: bool) -> dict:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [] if committed else None,
        "preferred_read_replica": -1,
        "records": b"",
    }


async def _wait(
    replicas: ReplicaManager, isr: IsrManager, stopping: Callable[[], bool], req: Any, ctx: RequestContext
) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    min_bytes = max(req.min_bytes, 1)
    watched: list[Partition] = []
    to_log_end = _replica_id(req) >= 0
    for t in req.topics:
        parts = replicas.topic_partitions(t.topic)
        for p in t.partitions:
            part = parts.get(p.partition)
            if part is not None:
                watched.append(part)
    current: list[asyncio.Future] = []

    def wake() -> None:
        if current and not current[-1].done():
            current[-1].set_result(None)

    expired = False

    def timed_out() -> None:  # the loop's clock may read a hair before the deadline when it fires
        nonlocal expired
        expired = True
        wake()

    timer = loop.call_at(deadline, timed_out)  # one timer per waiting fetch, not per wake-up
    try:
        while True:
            current[:] = [loop.create_future()]
            for part in watched:
                part.add_waiter(wake, reads_to_log_end=to_log_end)
            try:
                await current[-1]
            finally:
                for part in watched:
                    part.remove_waiter(wake)
            response, nbytes, errors = _build(replicas, isr, req, ctx.now_ms())
            if nbytes >= min_bytes or errors or expired or loop.time() >= deadline or stopping():
                return response
    finally:
        timer.cancel()
