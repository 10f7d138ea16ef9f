"""Reading a topic as records arrive: the read_committed tail of its partitions, in Arrow batches.

`TailReader` keeps, per partition, the fetch position (what to ask the leader for next) and the
handed position (the next offset the caller has not been given). Each `poll` first hands over rows
already fetched, then long-polls the leaders (one Fetch per leader and round, ``max_wait_ms`` at most
`ROUND_WAIT_S`) until it holds ``max_records`` rows or ``max_wait_s`` has passed. A round's response
is the only data held beyond what is handed over, so memory stays within ``fetch_max_bytes`` plus
one batch. Records are decoded exactly as `pylog.sdk.kafka_source` decodes a bounded read (the same
read_committed rules: control batches and aborted transactions never become rows).

Leadership moves and broker restarts are waited out: a partition whose leader answers
NOT_LEADER_OR_FOLLOWER (or whose connection fails) is retried after a metadata refresh. A position
outside the log (retention deleted it, or the topic was re-created) restarts at the log start
offset when below it and at the end when above it, with a warning. Partitions added to the topic
are picked up from their start when the reader follows every partition.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Sequence

import pyarrow as pa

from pylog.client.fetch_session import SESSION_ERRORS, FetchSessionHandler
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.protocol.errors import ErrorCode
from pylog.sdk.client import FETCH, READ_COMMITTED, KafkaClient, KafkaError
from pylog.sdk.kafka_source import EARLIEST_TS, LATEST_TS, FetchOptions, _consume_partition, _PartitionCursor
from pylog.sdk.offsets import PartitionRange

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
ROUND_WAIT_S = 0.5  # a long poll never waits longer than this, so several leaders share a batch
METADATA_REFRESH_S = 10.0  # how often a reader of every partition looks for new ones
RETRY_BACKOFF_S = (0.05, 2.0)  # a failed leader is retried after this, doubling up to the max
TAIL_FETCH_MAX_BYTES = 16 * 1024 * 1024
TAIL_PARTITION_MAX_BYTES = 4 * 1024 * 1024
SOURCE_COLUMNS = ("offset", "timestamp", "key", "value", "headers", "timestampType")
_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE,
})


def tail_options(options: FetchOptions | None) -> FetchOptions:
    """Fetch sizes for a tail: a bounded read's 64 MiB responses are more than a follower holds."""
    opts = options or FetchOptions(client_id="pylog-follow")
    return dataclasses.replace(opts, fetch_max_bytes=min(opts.fetch_max_bytes, TAIL_FETCH_MAX_BYTES),
                               max_partition_fetch_bytes=min(opts.max_partition_fetch_bytes,
                                                             TAIL_PARTITION_MAX_BYTES))


class TailReader:
    """The tail of `topic` from `positions` ({partition: next offset}); every coroutine runs on the
    SDK's I/O loop. ``follow_new_partitions``: partitions created later join from their start."""

    def __init__(self, bootstrap_servers: str | Sequence[str], topic: str, positions: dict[int, int],
                 columns: Sequence[str] = SOURCE_COLUMNS, *, options: FetchOptions | None = None,
                 follow_new_partitions: bool = False, clock: Clock = SYSTEM_CLOCK) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.clock = clock
        self.topic = topic
        self.columns = tuple(c for c in SOURCE_COLUMNS if c in columns)
        self.options = tail_options(options)
        self.follow_new_partitions = follow_new_partitions
        self._cursors = {p: _cursor(topic, p, off) for p, off in positions.items()}
        self._handed = dict(positions)
        self._pending: dict[int, deque[pa.RecordBatch]] = {p: deque() for p in positions}
        self._stable: dict[int, int] = {}  # last stable offset each partition reported
        self._client: KafkaClient | None = None
        self._leaders: dict[int, int] = {}
        self._metadata_at = 0.0
        self._retry_at: dict[int, float] = {}  # leader -> when it may be asked again
        self._backoff: dict[int, float] = {}
        self._sessions: dict[int, FetchSessionHandler] = {}  # a fetch session per leader

    @property
    def positions(self) -> dict[int, int]:
        """{partition: next offset not yet handed over}: what a consumer group should commit."""
        return dict(self._handed)

    @property
    def caught_up(self) -> bool:
        """Every partition has handed over everything below the last stable offset it last reported."""
        return not any(self._pending.values()) and all(
            self._cursors[p].position >= self._stable.get(p, LONG_MAX) for p in self._cursors)

    def lag(self) -> dict[int, int]:
        """{partition: records below the last stable offset not handed over yet} (as last reported)."""
        return {p: max(0, self._stable[p] - self._handed[p]) for p in self._cursors if p in self._stable}

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def seek(self, positions: dict[int, int]) -> None:
        """Continue these partitions from these offsets (dropping what was fetched past them)."""
        for p, off in positions.items():
            self._add_partition(p, off)

    async def connect(self) -> KafkaClient:
        """The reader's client (connected on first use)."""
        if self._client is None:
            self._client = await tail_client(self.bootstrap_servers, self.options)
        return self._client

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
            await self._round(min(remaining, ROUND_WAIT_S))

    def _take(self, out: list[tuple[int, pa.RecordBatch]], wanted: int) -> int:
        return take_rows(self._pending, self._handed, {p: c.position for p, c in self._cursors.items()},
                         out, wanted)

    # --- fetching ----------------------------------------------------------------------------

    async def _round(self, wait_s: float) -> None:
        """One long poll of every leader that may be asked now; fills the pending queues."""
        try:
            client = await self.connect()
            await self._refresh_metadata(client)
        except (ConnectionError, TimeoutError, OSError, KafkaError) as exc:
            log.debug("tail of %s: metadata: %s", self.topic, exc)
            await asyncio.sleep(min(wait_s, RETRY_BACKOFF_S[1]))
            self._metadata_at = 0.0
            return
        now = self.clock.monotonic_s()
        by_leader: dict[int, list[int]] = {}
        for p in self._cursors:
            leader = self._leaders.get(p, -1)
            if leader >= 0 and self._retry_at.get(leader, 0.0) <= now:
                by_leader.setdefault(leader, []).append(p)
        if not by_leader:
            await asyncio.sleep(min(wait_s, RETRY_BACKOFF_S[0] * 4))
            self._metadata_at = 0.0
            return
        await asyncio.gather(*(self._fetch(client, leader, parts, wait_s)
                               for leader, parts in by_leader.items()))

    async def _refresh_metadata(self, client: KafkaClient) -> None:
        now = self.clock.monotonic_s()
        if self._leaders and now - self._metadata_at < METADATA_REFRESH_S:
            return
        tm = await client.metadata([self.topic])
        found = tm.topics.get(self.topic)
        if found is None or found.error_code:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if found is None else found.error_code
            raise KafkaError(code, f"metadata for topic {self.topic!r}")
        self._leaders = {p: pm.leader for p, pm in found.partitions.items()}
        self._metadata_at = now
        new = sorted(set(found.partitions) - set(self._cursors)) if self.follow_new_partitions else []
        if new:
            starts = await client.list_offsets(self.topic, {p: self._leaders[p] for p in new},
                                               dict.fromkeys(new, EARLIEST_TS))
            for p in new:
                self._add_partition(p, starts[p][0])
            log.info("following new partitions %s of %s from their start", new, self.topic)

    def _add_partition(self, partition: int, offset: int) -> None:
        self._cursors[partition] = _cursor(self.topic, partition, offset)
        self._handed[partition] = offset
        self._pending[partition] = deque()

    def _failed(self, leader: int, exc: BaseException) -> None:
        delay = min(self._backoff.get(leader, RETRY_BACKOFF_S[0]) * 2, RETRY_BACKOFF_S[1])
        self._backoff[leader] = delay
        self._retry_at[leader] = self.clock.monotonic_s() + delay
        self._metadata_at = 0.0
        log.debug("tail of %s: broker %d: %s (retrying in %.2fs)", self.topic, leader, exc, delay)

    async def _fetch(self, client: KafkaClient, leader: int, partitions: list[int], wait_s: float) -> None:
        o = self.options
        session = self._sessions.setdefault(leader, FetchSessionHandler())  # KIP-227
        request = session.build({
            (self.topic, p): {"partition": p, "fetch_offset": self._cursors[p].position,
                              "partition_max_bytes": o.max_partition_fetch_bytes} for p in partitions})
        body = {
            "replica_id": -1, "max_wait_ms": max(0, int(wait_s * 1000)), "min_bytes": 1,
            "max_bytes": o.fetch_max_bytes, "isolation_level": READ_COMMITTED, **request.body(),
        }
        began = self.clock.monotonic_s()
        try:
            conn = await client.connection(leader)
            resp = await conn.request(FETCH, client.version(FETCH), body)
        except (ConnectionError, TimeoutError, OSError) as exc:
            session.handle_error()
            self._failed(leader, exc)
            return
        finally:
            if self.clock.monotonic_s() - began > 2 * wait_s + 1:
                log.info("tail of %s: a fetch from broker %d took %.1fs", self.topic, leader,
                         self.clock.monotonic_s() - began)
        error = getattr(resp, "error_code", 0)
        answered = [(tr.topic, pr.partition_index) for tr in resp.responses for pr in tr.partitions]
        if not session.handle_response(error, getattr(resp, "session_id", 0), answered):
            if error not in SESSION_ERRORS:  # a session error: the next fetch is full, at once
                self._failed(leader, KafkaError(error, "Fetch"))
            return
        self._backoff.pop(leader, None)
        for tr in resp.responses:
            for pr in tr.partitions:
                p = pr.partition_index
                cursor = self._cursors.get(p)
                if cursor is not None and not pr.error_code:
                    # kept even while records wait: a session answers an offset once, when it moves
                    lso = pr.last_stable_offset
                    self._stable[p] = lso if lso >= 0 else pr.high_watermark
                if cursor is None or self._pending[p]:
                    continue
                if pr.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    await self._reset(client, p)
                    continue
                if pr.error_code in _RETRIABLE:
                    self._failed(leader, KafkaError(pr.error_code, f"Fetch {self.topic}-{p}"))
                    continue
                if pr.error_code:
                    raise KafkaError(pr.error_code, f"Fetch {self.topic}-{p}")
                for batch in _consume_partition(cursor, pr, self.columns, o):
                    self._pending[p].append(batch)
                cursor.empty_fetches = 0  # an empty answer at the tail is the normal case

    async def _reset(self, client: KafkaClient, partition: int) -> None:
        leaders = {partition: self._leaders[partition]}
        lo = (await client.list_offsets(self.topic, leaders, {partition: EARLIEST_TS}))[partition][0]
        hi = (await client.list_offsets(self.topic, leaders, {partition: LATEST_TS}))[partition][0]
        old = self._cursors[partition].position
        new = lo if old < lo else hi
        log.warning("offset %d of %s-%d is out of range [%d, %d): continuing from %d", old, self.topic,
                    partition, lo, hi, new)
        self._cursors[partition] = _cursor(self.topic, partition, new)
        self._handed[partition] = new


async def tail_client(bootstrap_servers: str | Sequence[str], options: FetchOptions | None) -> KafkaClient:
    """A started client of the cluster with a tail's fetch options (client id, timeout, security)."""
    o = tail_options(options)
    client = KafkaClient(bootstrap_servers, client_id=o.client_id, request_timeout_s=o.request_timeout_s,
                         security=o.security)
    await client.start()
    return client


def _cursor(topic: str, partition: int, offset: int) -> _PartitionCursor:
    return _PartitionCursor(PartitionRange(topic, partition, offset, LONG_MAX))


def take_rows(pending: dict[int, deque[pa.RecordBatch]], handed: dict[int, int], next_offsets: dict[int, int],
              out: list[tuple[int, pa.RecordBatch]], wanted: int) -> int:
    """Move up to `wanted` pending rows (offset first) into `out`, partition by partition, noting in
    `handed` the offset after the last handed (after a drained partition: its next fetch offset,
    past any control records); returns how many."""
    taken = 0
    for p, queue in pending.items():
        while queue and taken < wanted:
            batch = queue[0]
            n = min(batch.num_rows, wanted - taken)
            if n == batch.num_rows:
                queue.popleft()
            else:
                queue[0] = batch.slice(n)
                batch = batch.slice(0, n)
            out.append((p, batch))
            taken += n
            handed[p] = int(batch.column(0)[n - 1].as_py()) + 1
        if not queue:
            handed[p] = max(handed[p], next_offsets[p])
    return taken
