"""Reading a topic through the Kafka protocol (any Kafka-compatible broker, no filesystem access).

Partitions are fetched concurrently: one task per (leader, lane), each sending read_committed Fetch
requests for all of its unfinished partitions at once. Every RecordBatch in a response is decoded
straight into Arrow by ``pylog.protocol.records.decode_batch``; the per-batch Python work is the
header walk that drops control batches and aborted transactional data (Kafka's consumer rule: a
batch of a producer listed in ``aborted_transactions`` is skipped from that transaction's first offset
until the producer's ABORT marker).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pylog.client.fetch_session import SESSION_ERRORS, FetchSessionHandler
from pylog.protocol.errors import ErrorCode
from pylog.protocol.records import decode_batch, iter_batches, parse_control_record
from pylog.sdk import aio
from pylog.sdk.client import FETCH, READ_COMMITTED, KafkaClient, KafkaError
from pylog.sdk.constant import int32_column
from pylog.sdk.offsets import OffsetOutOfRangeError, PartitionRange, UnknownTopicError
from pylog.tasks import cancel_and_wait

EARLIEST_TS, LATEST_TS = -2, -1
_DONE = object()


@dataclass(frozen=True)
class FetchOptions:
    """Fetch sizes, in Kafka's client config terms (``fetch.max.bytes``, ``max.partition.fetch.bytes``)."""

    fetch_max_bytes: int = 64 * 1024 * 1024
    max_partition_fetch_bytes: int = 16 * 1024 * 1024
    lanes_per_broker: int = 4
    coalesce_below_rows: int = 4096
    request_timeout_s: float = 30.0
    client_id: str = "pylog-sdk"
    security: Any = None  # Kafka client security settings (see pylog.client.cluster.client_security)


class KafkaTopicSource:
    """`OffsetSource` + reader over a Kafka cluster. Use as a context manager (it holds one client)."""

    def __init__(self, bootstrap_servers: str | Sequence[str], options: FetchOptions | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.options = options or FetchOptions()
        self._client: KafkaClient | None = None

    def __enter__(self) -> KafkaTopicSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            aio.run(client.close())

    async def _started(self) -> KafkaClient:
        if self._client is None:
            client = KafkaClient(self.bootstrap_servers, client_id=self.options.client_id,
                                 request_timeout_s=self.options.request_timeout_s,
                                 security=self.options.security)
            await client.start()
            self._client = client
        return self._client

    def partitions(self, topic: str) -> list[int]:
        async def go() -> list[int]:
            tm = await (await self._started()).topic(topic)
            return sorted(tm.partitions)
        return aio.run(go())

    def _list(self, topic: str, times: dict[int, int]) -> dict[int, tuple[int, int]]:
        async def go() -> dict[int, tuple[int, int]]:
            client = await self._started()
            tm = await client.topic(topic)
            leaders = {p: tm.partitions[p].leader for p in times}
            return await client.list_offsets(topic, leaders, times)
        return aio.run(go())

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        async def go() -> dict[int, tuple[int, int]]:
            client = await self._started()
            tm = await client.topic(topic)
            leaders = {p: tm.partitions[p].leader for p in partitions}
            lo, hi = await asyncio.gather(
                client.list_offsets(topic, leaders, dict.fromkeys(partitions, EARLIEST_TS)),
                client.list_offsets(topic, leaders, dict.fromkeys(partitions, LATEST_TS)))
            return {p: (lo[p][0], hi[p][0]) for p in partitions}
        return aio.run(go())

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        found = self._list(topic, times)
        return {p: (None if off < 0 else off) for p, (off, _ts) in found.items()}

    def read(self, ranges: list[PartitionRange], columns: Sequence[str]
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        """Batches of the requested source columns (of offset, timestamp, key, value, headers,
        timestampType), each within its range, ranges interleaved as their data arrives."""
        todo = [r for r in ranges if r.count > 0]
        if not todo:
            return iter(())
        return aio.iterate(fetch_ranges(self.bootstrap_servers, todo, tuple(columns), self.options))


async def fetch_ranges(bootstrap_servers: str | Sequence[str], ranges: list[PartitionRange],
                       columns: tuple[str, ...], options: FetchOptions
                       ) -> AsyncIterator[tuple[PartitionRange, pa.RecordBatch]]:
    client = KafkaClient(bootstrap_servers, client_id=options.client_id,
                         request_timeout_s=options.request_timeout_s, security=options.security)
    await client.start()
    tasks: list[asyncio.Task[None]] = []
    try:
        leaders: dict[str, dict[int, int]] = {}
        for topic in {r.topic for r in ranges}:
            tm = await client.topic(topic)
            leaders[topic] = {p: pm.leader for p, pm in tm.partitions.items()}
        lanes: dict[tuple[int, int], list[PartitionRange]] = {}
        per_broker: dict[int, int] = {}
        for r in ranges:
            leader = leaders[r.topic].get(r.partition)
            if leader is None:
                raise UnknownTopicError(f"partition {r.partition} of topic {r.topic!r} no longer exists")
            n = per_broker.get(leader, 0)
            per_broker[leader] = n + 1
            lanes.setdefault((leader, n % options.lanes_per_broker), []).append(r)
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=4 * len(lanes))
        for (leader, lane), rs in lanes.items():
            tasks.append(asyncio.create_task(_fetch_lane(client, leader, lane, rs, columns, options, queue)))
        running = len(tasks)
        while running:
            item = await queue.get()
            if item is _DONE:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        await cancel_and_wait(tasks)
        await client.close()


class _PartitionCursor:
    """Fetch position and read_committed state of one range."""

    def __init__(self, r: PartitionRange) -> None:
        self.range = r
        self.position = r.start
        self.aborted_pids: set[int] = set()
        self.empty_fetches = 0

    @property
    def done(self) -> bool:
        return self.position >= self.range.end


async def _fetch_lane(client: KafkaClient, leader: int, lane: int, ranges: list[PartitionRange],
                      columns: tuple[str, ...], options: FetchOptions, queue: asyncio.Queue[Any]) -> None:
    try:
        conn = await client.connection(leader, lane)
        version = client.version(FETCH)
        cursors = {(r.topic, r.partition): _PartitionCursor(r) for r in ranges}
        session = FetchSessionHandler()  # KIP-227: after the first, fetches name only what moved
        while True:
            active = {key: c for key, c in cursors.items() if not c.done}
            if not active:
                break
            request = session.build({
                key: {"partition": key[1], "fetch_offset": c.position,
                      "partition_max_bytes": options.max_partition_fetch_bytes}
                for key, c in active.items()})
            body = {
                "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": options.fetch_max_bytes,
                "isolation_level": READ_COMMITTED, **request.body(),
            }
            resp = await conn.request(FETCH, version, body)
            error = getattr(resp, "error_code", 0)
            answered = [(tr.topic, pr) for tr in resp.responses for pr in tr.partitions]
            if not session.handle_response(error, getattr(resp, "session_id", 0),
                                           ((t, pr.partition_index) for t, pr in answered)):
                if error and error not in SESSION_ERRORS:
                    raise KafkaError(error, "Fetch")
                continue  # a session error: the next fetch is full
            for topic, pr in answered:
                cursor = cursors.get((topic, pr.partition_index))
                if cursor is None or cursor.done:
                    continue
                for batch in _consume_partition(cursor, pr, columns, options):
                    await queue.put((cursor.range, batch))
            if not request.is_full:  # an incremental answer leaves out partitions with nothing new
                seen = {(t, pr.partition_index) for t, pr in answered}
                for key, cursor in active.items():
                    if key not in seen:
                        _no_progress(cursor, -1, -1)
        closing = session.close()
        if closing is not None:
            await conn.request(FETCH, version, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 0,
                "isolation_level": READ_COMMITTED, **closing.body()})
    except asyncio.CancelledError:
        raise  # the reader is gone: nobody waits for this lane
    except Exception as exc:
        await queue.put(exc)
    else:
        await queue.put(_DONE)


def _consume_partition(cursor: _PartitionCursor, pr: Any, columns: tuple[str, ...],
                       options: FetchOptions) -> list[pa.RecordBatch]:
    r = cursor.range
    if pr.error_code:
        if pr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise OffsetOutOfRangeError(
                f"offset {cursor.position} of {r.topic}-{r.partition} is out of range on the broker "
                f"(log start {pr.log_start_offset}, high watermark {pr.high_watermark}); "
                "retention may have deleted it")
        raise KafkaError(pr.error_code, f"Fetch {r.topic}-{r.partition}")
    aborted = [(a.first_offset, a.producer_id) for a in (pr.aborted_transactions or [])]
    heapq.heapify(aborted)
    pieces: list[pa.RecordBatch] = []
    progressed = False
    records = pr.records
    for header, view in iter_batches(records if records is not None else b""):
        last = header.base_offset + header.last_offset_delta
        if last < cursor.position:
            continue
        progressed = True
        next_position = last + 1
        while aborted and aborted[0][0] <= last:
            cursor.aborted_pids.add(heapq.heappop(aborted)[1])
        if header.is_control:
            if header.producer_id in cursor.aborted_pids:
                control = decode_batch(view).records
                if control.num_rows and parse_control_record(control.column(2)[0].as_py(),
                                                             control.column(3)[0].as_py()).is_abort:
                    cursor.aborted_pids.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in cursor.aborted_pids):
            batch = decode_batch(view).records
            batch = _clip(batch, cursor.position, r.end, header.base_offset, last)
            if batch.num_rows:
                pieces.append(_shape(batch, header, columns))
        cursor.position = next_position
        if cursor.position >= r.end:
            break
    if not progressed:
        _no_progress(cursor, pr.high_watermark, pr.last_stable_offset)
        return []
    cursor.empty_fetches = 0
    return _coalesce(pieces, options.coalesce_below_rows)


def _no_progress(cursor: _PartitionCursor, high_watermark: int, last_stable_offset: int) -> None:
    """A fetch that brought a partition nothing: after 50 in a row, its range cannot be read."""
    cursor.empty_fetches += 1
    if cursor.empty_fetches > 50:
        r = cursor.range
        raise OffsetOutOfRangeError(
            f"{r.topic}-{r.partition}: no data at offset {cursor.position} below the requested end "
            f"{r.end} (high watermark {high_watermark}, last stable offset {last_stable_offset})")


def _clip(batch: pa.RecordBatch, start: int, end: int, first: int, last: int) -> pa.RecordBatch:
    if first >= start and last < end:
        return batch
    offsets = batch.column(0).to_numpy()
    lo = int(np.searchsorted(offsets, start, "left"))
    hi = int(np.searchsorted(offsets, end, "left"))
    return batch.slice(lo, hi - lo)


def _shape(batch: pa.RecordBatch, header: Any, columns: tuple[str, ...]) -> pa.RecordBatch:
    """RECORD_SCHEMA rows -> the requested source columns (LogAppendTime batches carry the broker's
    time in max_timestamp, which is every record's timestamp)."""
    arrays = []
    n = batch.num_rows
    for name in columns:
        if name == "timestampType":
            arrays.append(int32_column(header.timestamp_type, n))
        elif name == "timestamp" and header.timestamp_type == 1:
            arrays.append(pa.repeat(pa.scalar(header.max_timestamp, pa.timestamp("ms")), n))
        else:
            arrays.append(batch.column(name))
    return pa.RecordBatch.from_arrays(arrays, names=list(columns))


def _coalesce(pieces: list[pa.RecordBatch], small_rows: int) -> list[pa.RecordBatch]:
    """Many small producer batches (one record each, say) become one Arrow batch; big ones pass as is."""
    if len(pieces) <= 1 or sum(p.num_rows for p in pieces) >= small_rows * len(pieces):
        return pieces
    return [pa.concat_batches(pieces)]
