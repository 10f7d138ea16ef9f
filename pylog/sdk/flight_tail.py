"""Following a topic over Arrow Flight: `FlightTail`, the twin of `pylog.sdk.tail.TailReader` for a
cluster that serves Flight (the same positions, hand-over and lag, without a Kafka Fetch).

Each partition has at most one tailing DoGet at its leader at a time
(`pylog.sdk.flight_source.FlightTopicSource.tail`): the leader waits up to `ROUND_WAIT_S` for
records above the position, then streams what is readable (never past the high watermark, nor the
last stable offset: the follower reads committed) up to `TAIL_OFFSETS` offsets, and says where the
next read starts. The DoGets run on a small thread pool, so an idle partition's wait never holds
another's records back; `poll` hands over what arrived, and a DoGet still waiting when `poll`
returns is taken up by the next one. Memory stays within one answer per partition plus a batch.

A DoGet refused because its broker no longer leads the partition or cannot serve the offset yet
(a leader just elected), or a broker that does not answer, is asked again at the partition's
leader after a wait that doubles with each failure (`RETRY_BACKOFF_S`). A position outside the
log restarts at the log start when below it and at the end when above it, with a warning.
Partitions added to the topic are picked up from their start when the reader follows every
partition. Group offsets (``follow(group=...)``) are still committed through the Kafka protocol.
Imported only when a follower reads over Flight (it needs ``pyarrow.flight``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.sdk.client import KafkaClient
from pylog.sdk.flight_source import NOT_LED, OUT_OF_RANGE, FlightTopicSource, TailEnd, _readable
from pylog.sdk.kafka_source import FetchOptions
from pylog.sdk.tail import (
    METADATA_REFRESH_S,
    RETRY_BACKOFF_S,
    ROUND_WAIT_S,
    SOURCE_COLUMNS,
    tail_client,
    take_rows,
)

log = logging.getLogger(__name__)

TAIL_OFFSETS = 65_536  # the most offsets one tailing DoGet covers
TAIL_THREADS = 8  # tailing DoGets in flight at once


class FlightTail:
    """The read_committed tail of `topic` from `positions` ({partition: next offset}) over Flight;
    the coroutines run on the SDK's I/O loop, the DoGets on the reader's own threads."""

    def __init__(self, source: FlightTopicSource, bootstrap_servers: Any, topic: str,
                 positions: dict[int, int], columns: Sequence[str] = SOURCE_COLUMNS, *,
                 options: FetchOptions | None = None, follow_new_partitions: bool = False,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.source = source
        self.bootstrap_servers = bootstrap_servers
        self.options = options
        self.topic = topic
        self.clock = clock
        # the offset column first: positions are read from it
        self.columns = ("offset", *(c for c in SOURCE_COLUMNS if c in columns and c != "offset"))
        self.follow_new_partitions = follow_new_partitions
        self.gets = 0  # tailing DoGets answered
        self.retries = 0  # DoGets asked again (a leader moved, not ready yet, or not answering)
        self._next: dict[int, int] = {}  # where the next DoGet starts
        self._handed: dict[int, int] = {}
        self._pending: dict[int, deque[pa.RecordBatch]] = {}
        self._readable: dict[int, int] = {}  # the readable end each partition last reported
        self._epoch: dict[int, int] = {}  # a seek makes the DoGet in flight stale
        self._inflight: dict[int, tuple[Future[Any], int]] = {}
        self._failures: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._relocate: set[int] = set()
        self._pool = ThreadPoolExecutor(max_workers=TAIL_THREADS, thread_name_prefix=f"flight-tail {topic}")
        self._partitions_at = clock.monotonic_s()
        self._client: KafkaClient | None = None
        for p, off in positions.items():
            self._add_partition(p, off)

    @property
    def positions(self) -> dict[int, int]:
        """{partition: next offset not yet handed over}: what a consumer group should commit."""
        return dict(self._handed)

    def lag(self) -> dict[int, int]:
        """{partition: committed records not handed over yet} (as last reported)."""
        return {p: max(0, end - self._handed[p]) for p, end in self._readable.items() if p in self._handed}

    def seek(self, positions: dict[int, int]) -> None:
        """Continue these partitions from these offsets (dropping what was fetched past them)."""
        for p, off in positions.items():
            self._add_partition(p, off)

    def _add_partition(self, partition: int, offset: int) -> None:
        self._next[partition] = self._handed[partition] = offset
        self._pending[partition] = deque()
        self._epoch[partition] = self._epoch.get(partition, 0) + 1

    async def connect(self) -> KafkaClient:
        """A Kafka client of the cluster, for the group's offsets (connected on first use)."""
        if self._client is None:
            self._client = await tail_client(self.bootstrap_servers, self.options)
        return self._client

    async def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        # the DoGets in flight end within a round
        await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)
        self.source.close()
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    async def poll(self, max_records: int, max_wait_s: float) -> list[tuple[int, pa.RecordBatch]]:
        """Up to `max_records` rows as (partition, batch) pairs, waiting at most `max_wait_s` for them
        (returns early once it has `max_records`); advances `positions` past what it returns."""
        deadline = self.clock.monotonic_s() + max(0.0, max_wait_s)
        out: list[tuple[int, pa.RecordBatch]] = []
        wanted = max_records
        while True:
            wanted -= self._take(out, wanted)
            remaining = deadline - self.clock.monotonic_s()
            if wanted <= 0 or remaining <= 0:
                return out
            await self._new_partitions()
            self._launch()
            waiting = [asyncio.wrap_future(f) for f, _ in self._inflight.values()]
            if waiting:
                await asyncio.wait(waiting, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            else:  # every partition waits out a failure
                now = self.clock.monotonic_s()
                await asyncio.sleep(max(0.0, min(remaining, min(self._retry_at.values(), default=now) - now)))
            self._collect()

    def _take(self, out: list[tuple[int, pa.RecordBatch]], wanted: int) -> int:
        return take_rows(self._pending, self._handed, self._next, out, wanted)

    def _launch(self) -> None:
        """A tailing DoGet for every partition without one, nothing pending and no failure to wait out."""
        now = self.clock.monotonic_s()
        for p in self._next:
            if p in self._inflight or self._pending[p] or self._retry_at.get(p, 0.0) > now:
                continue
            relocate = p in self._relocate
            self._relocate.discard(p)
            future = self._pool.submit(self._get, p, self._next[p], relocate)
            self._inflight[p] = (future, self._epoch[p])

    def _get(self, partition: int, start: int, relocate: bool) -> tuple[list[pa.RecordBatch], TailEnd, bool]:
        """One DoGet (on a pool thread): (batches, where to go on, whether the position was reset)."""
        try:
            batches, end = self.source.tail(self.topic, partition, start, start + TAIL_OFFSETS, self.columns,
                                            int(ROUND_WAIT_S * 1000), relocate=relocate)
            return batches, end, False
        except flight.FlightServerError as exc:
            if OUT_OF_RANGE not in str(exc):
                raise
        ((lo, hi),) = self.source.offset_bounds(self.topic, [partition]).values()
        new = lo if start < lo else hi
        log.warning("offset %d of %s-%d is out of range [%d, %d): continuing from %d", start, self.topic,
                    partition, lo, hi, new)
        return [], TailEnd(new, hi), True

    def _collect(self) -> None:
        """What the finished DoGets brought: rows to hand over, or a failure to wait out."""
        for p, (future, epoch) in list(self._inflight.items()):
            if not future.done():
                continue
            del self._inflight[p]
            if epoch != self._epoch[p]:  # a seek since
                continue
            exc = future.exception()
            if exc is None:
                batches, end, reset = future.result()
                self.gets += 1
                self._pending[p].extend(batches)
                self._next[p] = end.next_offset
                self._readable[p] = end.readable_end
                if reset:
                    self._handed[p] = end.next_offset
                self._failures.pop(p, None)
                self._retry_at.pop(p, None)
            elif isinstance(exc, (flight.FlightUnavailableError, flight.FlightTimedOutError)) or (
                    isinstance(exc, flight.FlightServerError) and NOT_LED in str(exc)):
                self.retries += 1
                failures = self._failures[p] = self._failures.get(p, 0) + 1
                delay = min(RETRY_BACKOFF_S[0] * 2 ** failures, RETRY_BACKOFF_S[1])
                self._retry_at[p] = self.clock.monotonic_s() + delay
                self._relocate.add(p)  # ask where the partition is led now
                log.debug("tail of %s-%d over Flight: %s (asking again in %.2fs)", self.topic, p, exc, delay)
            else:
                raise _readable(exc, flight)

    async def _new_partitions(self) -> None:
        """Partitions added to the topic join from their start (looked for every METADATA_REFRESH_S)."""
        now = self.clock.monotonic_s()
        if not self.follow_new_partitions or now - self._partitions_at < METADATA_REFRESH_S:
            return
        self._partitions_at = now
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, lambda: self.source.locations(self.topic))
        new = sorted(set(found) - set(self._next))
        if new:
            bounds = await loop.run_in_executor(None, self.source.offset_bounds, self.topic, new)
            for p in new:
                self._add_partition(p, bounds[p][0])
            log.info("following new partitions %s of %s from their start", new, self.topic)
