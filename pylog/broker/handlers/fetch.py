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
partitions; an append fires it, and the fetch is rebuilt once per wake-up, never
on a timer loop.
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
from pylog.broker.partition import Partition
from pylog.broker.registry import serves
from pylog.broker.replica_manager import ReplicaManager
from pylog.broker.transactions import aborted_for_fetch

log = logging.getLogger(__name__)

READ_COMMITTED = 1


@serves(ApiKey.FETCH, versions=(0, 12))
def fetch(ctx: RequestContext, req: Any, *, replicas: ReplicaManager, stopping: Callable[[], bool]) -> Any:
    response, nbytes, errors = _build(replicas, req)
    if req.max_wait_ms <= 0 or nbytes >= max(req.min_bytes, 1) or errors:
        return response
    return _wait(replicas, stopping, req)


def _build(replicas: ReplicaManager, req: Any) -> tuple[dict, int, bool]:
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
                out.append(_empty(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, committed))
                errors = True
                continue
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


def _read_partition(part: Partition, p: Any, committed: bool, budget: int, min_one: bool) -> tuple[dict, int]:
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


async def _wait(replicas: ReplicaManager, stopping: Callable[[], bool], req: Any) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    min_bytes = max(req.min_bytes, 1)
    watched: list[Partition] = []
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

    timer = loop.call_at(deadline, wake)  # one timer per waiting fetch, not per wake-up
    try:
        while True:
            current[:] = [loop.create_future()]
            for part in watched:
                part.add_waiter(wake)
            try:
                await current[-1]
            finally:
                for part in watched:
                    part.remove_waiter(wake)
            response, nbytes, errors = _build(replicas, req)
            if nbytes >= min_bytes or errors or loop.time() >= deadline or stopping():
                return response
    finally:
        timer.cancel()
