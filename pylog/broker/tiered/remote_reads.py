"""Reads below the local log start, from the remote tier (Kafka's RemoteLogReader / DelayedRemoteFetch).

A consumer Fetch whose offset lies in the committed remote segments and below the partition's
local log start is answered from the store: the read (ranged GETs through a shared read-ahead
cache: slices of the segment's ``.wire`` object when it was uploaded with one, else the same
re-encoding as a local sealed segment's batches) runs on a bounded thread
pool, never on the event loop, and the Fetch response waits for it up to the request's max wait
plus ``remote.fetch.max.wait.ms``; past that the partition answers without records and the consumer
asks again. ListOffsets by timestamp searches remote segments the same way (pruned by their
largest timestamp first). Where the remote segments are comes from ``RemoteLogMetadata``: the
metadata image in a broker (a manifest-backed view in tests).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from pylog.storage.remote_cache import RemoteReadCache
from pylog.storage.remote_layout import RemoteLogMetadata, RemoteLogSegment, partition_prefix
from pylog.storage.remote_segment import RemoteLog
from pylog.storage.remote_store import RemoteStore

from pylog.broker.datapath.batch_bytes import encode_stored
from pylog.broker.datapath.producer_state import AbortedTxn
from pylog.broker.datapath.transactions import is_abort_marker, last_offset_of
from pylog.model import CONTROL_MASK, TRANSACTIONAL_MASK

DEFAULT_CACHE_BYTES = 256 << 20
DEFAULT_THREADS = 4
DEFAULT_FETCH_MAX_WAIT_MS = 500  # Kafka's remote.fetch.max.wait.ms
MAX_KEPT_READS = 32  # remote reads kept for a consumer that asks again after a timeout


@dataclass(slots=True)
class RemoteFetch:
    """One partition of a Fetch to be read from the store (Kafka's RemoteStorageFetchInfo)."""

    part: Any  # the Partition (its aborted transactions for read_committed)
    log: RemoteLog
    offset: int
    max_bytes: int
    upper: int
    min_one: bool
    committed: bool = False  # read_committed: the aborted transactions are derived too


class RemoteReads:
    """The broker's reads of the remote tier: which offsets it serves, and reading them off the loop."""

    def __init__(self, store: RemoteStore, metadata: Callable[[], RemoteLogMetadata], *,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, threads: int = DEFAULT_THREADS,
                 fetch_max_wait_ms: int = DEFAULT_FETCH_MAX_WAIT_MS) -> None:
        self.store = store
        self.metadata = metadata
        self.cache = RemoteReadCache(cache_bytes)
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="remote-fetch")
        self._logs: dict[tuple[uuid.UUID, int], tuple[tuple[RemoteLogSegment, ...], int | None, RemoteLog]]
        self._logs = {}
        self._inflight: dict[tuple[int, int, int, int, bool], Future[Any]] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.cache.close()

    # -- what the remote tier holds ------------------------------------------------------------

    def remote_log(self, part: Any) -> RemoteLog | None:
        """The partition's committed remote segments (None when nothing is remote); rebuilt only
        when the metadata's segment list changes."""
        tid = _topic_id(part.topic_id)
        if tid is None:
            return None
        md = self.metadata()
        segments = md.remote_segments(part.topic, tid, part.index)
        if not segments:
            self._logs.pop((tid, part.index), None)
            return None
        start = md.remote_log_start_offset(part.topic, tid, part.index)
        known = self._logs.get((tid, part.index))
        if known is not None and (known[0] is segments or known[0] == segments) and known[1] == start:
            return known[2]
        log = RemoteLog(self.store, partition_prefix(part.topic, tid, part.index), segments, self.cache,
                        log_start_offset=start)
        self._logs[(tid, part.index)] = (segments, start, log)
        return log

    def latest_tiered_offset(self, part: Any) -> int:
        """ListOffsets LATEST_TIERED (-5): the highest offset in the store, -1 when none."""
        log = self.remote_log(part)
        return -1 if log is None else log.log_end_offset - 1

    def plan(self, part: Any, offset: int, max_bytes: int, upper: int, min_one: bool,
             committed: bool = False) -> RemoteFetch | None:
        """A remote read when ``offset`` is in the store and below the local log start."""
        if offset >= part.local_log_start_offset or offset < part.log_start_offset:
            return None  # the common case (or below the log start: out of range), without the metadata
        log = self.remote_log(part)
        if log is None or not log.log_start_offset <= offset < min(log.log_end_offset,
                                                                   part.local_log_start_offset):
            return None
        return RemoteFetch(part, log, offset, max_bytes, min(upper, log.log_end_offset), min_one, committed)

    # -- reading off the event loop ------------------------------------------------------------

    async def read(self, fetch: RemoteFetch,
                   max_wait_ms: int) -> tuple[list[bytes | memoryview], list[AbortedTxn]]:
        """The wire batches of a planned remote read and, read_committed, the aborted transactions
        they overlap; nothing when the store did not answer in time. A read that times out keeps
        running, and the consumer's next fetch of the same offset takes its result: a slow store
        slows a consumer down but never stalls it."""
        key = (id(fetch.part), fetch.offset, fetch.max_bytes, fetch.upper, fetch.committed)
        fut = self._inflight.get(key)
        if fut is None or fut.cancelled():
            fut = self._pool.submit(_read_wire, fetch)
            self._inflight[key] = fut
            while len(self._inflight) > MAX_KEPT_READS:
                self._inflight.pop(next(iter(self._inflight)))
        try:
            timeout_s = (max_wait_ms + self.fetch_max_wait_ms) / 1000
            result = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), timeout_s)
        except asyncio.TimeoutError:
            return [], []
        self._inflight.pop(key, None)
        return result

    async def offset_for_timestamp(self, part: Any, timestamp: int,
                                   max_offset: int) -> tuple[int, int] | None:
        """ListOffsets by time among the offsets only the store holds (below the local log start);
        None: not there (the local log answers)."""
        if not self.may_hold_timestamp(part, timestamp):
            return None
        log = self.remote_log(part)
        assert log is not None
        limit = min(max_offset, part.local_log_start_offset, log.log_end_offset)
        found = self._pool.submit(log.offset_for_timestamp, timestamp, max_offset=limit)
        return await asyncio.wrap_future(found)

    async def max_timestamp_and_offset(self, part: Any, above: int = -1) -> tuple[int, int] | None:
        """MAX_TIMESTAMP among remote segments; None without reading when none has a timestamp
        above ``above`` (the local log's largest: a tie goes to the remote, smaller, offset)."""
        log = self.remote_log(part)
        if log is None or max(s.max_timestamp for s in log.segments) < above:
            return None
        return await asyncio.wrap_future(self._pool.submit(log.max_timestamp_and_offset))

    def may_hold_timestamp(self, part: Any, timestamp: int) -> bool:
        """Whether a remote segment below the local log start has a record at or after ``timestamp``."""
        log = self.remote_log(part)
        return log is not None and bool(log.segments_in(log.log_start_offset, part.local_log_start_offset,
                                                        min_timestamp=timestamp))


def remote_aborted(fetch: RemoteFetch, upper_offset: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping ``[fetch offset, upper_offset)`` of a remote read, derived
    from the stored batch metadata and markers (the partition's in-memory index covers only what
    this broker appended or replayed from its local segments)."""
    log = fetch.log
    part = fetch.part
    mask = TRANSACTIONAL_MASK | CONTROL_MASK
    special = log.batch_metadata(fetch.offset, log.log_end_offset, attributes=mask)
    data = special[(special["attributes"] & CONTROL_MASK) == 0]
    data = data[data["base_offset"] < upper_offset]
    if not len(data):
        return []
    markers = special[(special["attributes"] & CONTROL_MASK) != 0]
    if log.log_end_offset < part.log_end_offset:  # markers past the remote end are on local disk
        local = part.log.batch_metadata(max(log.log_end_offset, part.local_log_start_offset), None,
                                        attributes=CONTROL_MASK)
        markers = np.concatenate([markers, local])
    out: list[AbortedTxn] = []
    for pid in np.unique(data["producer_id"]).tolist():
        firsts = data["base_offset"][data["producer_id"] == pid]
        ends = markers["base_offset"][markers["producer_id"] == pid]
        for i, end in enumerate(ends.tolist()):
            start = ends[i - 1] if i else -1
            inside = firsts[(firsts > start) & (firsts < end)]
            if not len(inside):
                continue
            reader = log if end < log.log_end_offset else part.log
            if is_abort_marker(reader, end):
                out.append(AbortedTxn(pid, int(inside[0]), int(end)))
    return sorted(out, key=lambda a: a.first_offset)


def merge_aborted(known: list[AbortedTxn], found: list[AbortedTxn]) -> list[AbortedTxn]:
    """Both lists, each transaction once (by producer and ABORT marker: a consumer given one
    transaction twice would skip that producer's later batches too), by first offset."""
    have = {(a.producer_id, a.last_offset) for a in known}
    return sorted([*known, *(a for a in found if (a.producer_id, a.last_offset) not in have)],
                  key=lambda a: a.first_offset)


def _read_wire(fetch: RemoteFetch) -> tuple[list[bytes | memoryview], list[AbortedTxn]]:
    out: list[bytes | memoryview] = []
    total = 0
    for b in fetch.log.read_wire(fetch.offset, fetch.max_bytes, max_offset=fetch.upper,
                                 min_one=fetch.min_one):
        data = b if isinstance(b, memoryview) else encode_stored(b.meta, b.records)
        total += len(data)
        if total > fetch.max_bytes and (out or not fetch.min_one):
            break
        out.append(data)
    aborted = remote_aborted(fetch, last_offset_of(out[-1]) + 1) if fetch.committed and out else []
    return out, aborted


def _topic_id(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value if value.int else None
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError):
        return None
