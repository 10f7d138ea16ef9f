"""`_schemas` through the Kafka protocol: create it (compacted, one partition), tail partition 0
into the registry's image, append a plan's records with acks=all.

Every broker's registry tails the same partition, through whichever broker leads it, so a cluster
shares one registry state and a restart rebuilds it from the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pylog.client.cluster import KafkaClient
from pylog.client.errors import KafkaError
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.records import decode_batch, encode_batch, iter_batches
from pylog.schema_registry import records
from pylog.schema_registry.errors import OPERATION_TIMEOUT, STORE_ERROR, RegistryError
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

READ_UNCOMMITTED = 0
PARTITION = 0
REPLICATION_FACTOR = 3


class KafkaStore:
    """Apply-in-order tail of ``_schemas``-0 feeding ``apply(key, value)``; `append` writes records."""

    def __init__(
        self,
        bootstrap_servers: str,
        apply: Callable[[dict, dict | None], None],
        *,
        topic: str = records.TOPIC,
        timeout_s: float = 30.0,
        security: Any = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        self.client = KafkaClient(
            bootstrap_servers,
            client_id="pylog-schema-registry",
            request_timeout_s=timeout_s,
            security=security,
        )
        self.topic = topic
        self.timeout_s = timeout_s
        self._apply = apply
        self.position = 0  # next offset to apply
        self._advanced = asyncio.Event()
        self._tail_task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._failure: BaseException | None = None

    async def start(self) -> None:
        """Connect and begin tailing in the background (`wait_ready` waits for the first catch-up)."""
        self._tail_task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._tail_task is not None:
            await cancel_and_wait(self._tail_task)
        await self.client.close()

    async def wait_ready(self) -> None:
        try:
            await asyncio.wait_for(self._ready.wait(), self.timeout_s)
        except asyncio.TimeoutError:
            detail = f": {self._failure}" if self._failure else ""
            raise RegistryError(
                500, OPERATION_TIMEOUT, f"the schema registry has not read {self.topic} yet{detail}"
            ) from None

    async def leader(self) -> int:
        tm = await self.client.topic(self.topic)
        return tm.partitions[PARTITION].leader

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            try:
                await self.client.start()
                await self._ensure_topic()
                await self._tail()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker is starting or a leader moved: retry
                self._failure = exc
                log.info("schema registry: reading %s failed (%s); retrying", self.topic, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                with contextlib.suppress(Exception):
                    await self.client.close()

    async def _ensure_topic(self) -> None:
        md = await self.client.metadata([self.topic])
        tm = md.topics.get(self.topic)
        if tm is not None and tm.error_code == 0 and tm.partitions:
            return
        body = {
            "topics": [
                {
                    "name": self.topic,
                    "num_partitions": 1,
                    # as Confluent's kafkastore.topic.replication.factor (3), within the brokers there are
                    "replication_factor": max(1, min(REPLICATION_FACTOR, len(md.brokers))),
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in records.TOPIC_CONFIGS.items()],
                }
            ],
            "timeout_ms": int(self.timeout_s * 1000),
            "validate_only": False,
        }
        resp = await self.client.request(ApiKey.CREATE_TOPICS, body)
        for t in resp.topics:
            if t.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise KafkaError(
                    t.error_code, f"CreateTopics {self.topic}", getattr(t, "error_message", None)
                )

    async def _tail(self) -> None:
        leader = await self.leader()
        conn = await self.client.connection(leader, lane=1)
        version = conn.version(ApiKey.FETCH)
        while True:
            body = {
                "replica_id": -1,
                "max_wait_ms": 500,
                "min_bytes": 1,
                "max_bytes": 8 << 20,
                "isolation_level": READ_UNCOMMITTED,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": self.topic,
                        "partitions": [
                            {
                                "partition": PARTITION,
                                "fetch_offset": self.position,
                                "partition_max_bytes": 8 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            }
            resp = await conn.request(ApiKey.FETCH, version, body)
            for tr in resp.responses:
                for pr in tr.partitions:
                    if pr.error_code:
                        raise KafkaError(pr.error_code, f"Fetch {self.topic}-{PARTITION}")
                    self._consume(pr.records or b"")
                    if self.position >= pr.high_watermark and not self._ready.is_set():
                        self._ready.set()
                        self._failure = None

    def _consume(self, data: bytes) -> None:
        moved = False
        for header, view in iter_batches(data):
            last = header.base_offset + header.last_offset_delta
            if last < self.position:
                continue
            if not header.is_control:
                batch = decode_batch(view).records
                offsets = batch.column("offset").to_pylist()
                keys = batch.column("key").to_pylist()
                values = batch.column("value").to_pylist()
                for off, k, v in zip(offsets, keys, values):
                    if off < self.position:
                        continue
                    decoded = records.decode(k, v)
                    if decoded is not None:
                        try:
                            self._apply(*decoded)
                        except Exception:  # a record we cannot read must not stop the tail
                            log.exception("schema registry: skipping %s record at offset %d", self.topic, off)
            self.position = last + 1
            moved = True
        if moved:
            self._advanced.set()
            self._advanced = asyncio.Event()

    async def wait_applied(self, offset: int) -> None:
        """Until the tail has applied `offset`."""
        deadline = self.clock.monotonic_s() + self.timeout_s
        while self.position <= offset:
            remaining = deadline - self.clock.monotonic_s()
            if remaining <= 0:
                raise RegistryError(
                    500,
                    OPERATION_TIMEOUT,
                    f"the write to {self.topic} at offset {offset} was not read back in time",
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._advanced.wait(), remaining)

    async def next_advance(self, timeout_s: float) -> None:
        """Until the tail applies more records (or `timeout_s` passes)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._advanced.wait(), timeout_s)

    async def append(self, recs: Sequence[records.Record]) -> int:
        """Append `recs` as one batch (acks=all) and return the offset of the last one."""
        if not recs:
            return self.position - 1
        n = len(recs)
        now = self.clock.wall_ms()
        batch = pa.RecordBatch.from_pydict(
            {
                "offset": pa.array(range(n), pa.int64()),
                "timestamp": pa.array([now] * n, pa.timestamp("ms")),
                "key": pa.array([k for k, _ in recs], pa.binary()),
                "value": pa.array([v for _, v in recs], pa.binary()),
            }
        )
        blob = encode_batch(batch, base_offset=0)
        leader = await self.leader()
        conn = await self.client.connection(leader)
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": int(self.timeout_s * 1000),
            "topic_data": [{"name": self.topic, "partition_data": [{"index": PARTITION, "records": blob}]}],
        }
        resp = await conn.request(ApiKey.PRODUCE, conn.version(ApiKey.PRODUCE), body)
        for tr in resp.responses:
            for pr in tr.partition_responses:
                if pr.error_code:
                    raise RegistryError(
                        500,
                        STORE_ERROR,
                        f"writing to {self.topic} failed: {ErrorCode.of(pr.error_code).name}",
                    )
                return int(pr.base_offset) + n - 1
        raise RegistryError(500, STORE_ERROR, f"no answer for the write to {self.topic}")
