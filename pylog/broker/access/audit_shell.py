"""The audit trail's shell: events from the listeners, the authorizer and the schema registry go,
within their rate (`pylog.security.audit.AuditLimiter`), to the ``pylog.audit`` logger and, with
``pylog.audit.topic`` set, to that topic (JSON values keyed by principal), which the node creates
and appends to through its own client of the inter-broker listener, as the schema registry writes
``_schemas``. Events over the rate are counted and reported every
``pylog.audit.summary.interval.ms`` as one summary event.

Events wait in a bounded queue for the writer; what overflows it (the topic unreachable for long)
is counted in the next summary too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from typing import Any

import pyarrow as pa
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.records import encode_batch

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.config import BrokerConfig
from pylog.security.audit import (
    AUDIT_LOGGER,
    DROPPED,
    SUMMARY,
    AuditEvent,
    AuditLimiter,
    authentication,
    denial,
)
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)
audit_log = logging.getLogger(AUDIT_LOGGER)

QUEUE_MAX = 10_000
BATCH_MAX = 500
RETRY_S = 1.0
REPLICATION_FACTOR = 3


class AuditShell:
    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.topic = (config.raw("pylog.audit.topic") or "").strip()
        self.limiter = AuditLimiter(float(config.get("pylog.audit.rate.per.sec")))  # type: ignore[arg-type]
        self.summary_interval_s = max(0.001, config.int("pylog.audit.summary.interval.ms") / 1000)
        self.clock = clock
        self.node_id = config.node_id
        self._pending: deque[AuditEvent] = deque()
        self.overflowed = 0  # events the queue had no room for, since the last summary
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None

    # --- events -------------------------------------------------------------------------------

    def authenticated(
        self, ok: bool, principal: str, client_address: str, listener: str, operation: str, reason: str = ""
    ) -> None:
        self.record(authentication(ok, principal, client_address, listener, operation, reason,
                                   self.clock.wall_ms()))

    def denied(
        self, principal: str, client_address: str, listener: str, operation: str, resource: str,
        acl_operation: str, reason: str = "",
    ) -> None:
        self.record(denial(principal, client_address, listener, operation, resource, acl_operation,
                           self.clock.wall_ms(), reason))

    def record(self, event: AuditEvent) -> None:
        if not self.limiter.admit(event, self.clock.monotonic_ms() / 1000):
            return
        self._emit(event)

    def _emit(self, event: AuditEvent) -> None:
        event = dataclasses.replace(event, node_id=self.node_id)
        level = logging.WARNING if event.outcome != "success" else logging.INFO
        audit_log.log(level, "%s", event.to_json().decode())
        if not self.topic:
            return
        if len(self._pending) >= QUEUE_MAX:
            self.overflowed += 1
            return
        self._pending.append(event)
        if self._wake is not None and len(self._pending) == 1:
            self._wake.set()

    def summarize(self) -> None:
        """Emit the summary of what was dropped since the last one, if anything was."""
        summary = self.limiter.summary(self.clock.wall_ms())
        if self.overflowed:
            n, self.overflowed = self.overflowed, 0
            extra = {"queue full": n}
            now_ms = self.clock.wall_ms()
            summary = summary or AuditEvent(SUMMARY, DROPPED, "", "", "", "", time_ms=now_ms)
            summary = dataclasses.replace(summary, dropped={**summary.dropped, **extra})
        if summary is not None:
            self._emit(summary)

    # --- the writer ---------------------------------------------------------------------------

    def start(self) -> None:
        """The periodic summary (and the topic writer, once `start_topic` gives it a client)."""
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    def start_topic(self, bootstrap_servers: str, security: Any) -> None:
        if not self.topic or self._client is not None:
            return
        from pylog.client.cluster import KafkaClient

        self._client = KafkaClient(bootstrap_servers, client_id="pylog-audit", security=security)
        self.start()
        assert self._wake is not None
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()

    async def _run(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        next_summary = loop.time() + self.summary_interval_s
        topic_ready = False
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, next_summary - loop.time()))
            self._wake.clear()
            if loop.time() >= next_summary:
                self.summarize()
                next_summary = loop.time() + self.summary_interval_s
            if self._client is None or not self._pending:
                continue
            try:
                if not topic_ready:
                    await self._ensure_topic()
                    topic_ready = True
                while self._pending:
                    batch = [self._pending[i] for i in range(min(BATCH_MAX, len(self._pending)))]
                    await self._append(batch)
                    for _ in batch:
                        self._pending.popleft()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the topic's leader moved or is starting: try again
                log.info("audit: writing to %s failed (%s); retrying", self.topic, exc)
                await asyncio.sleep(RETRY_S)
                self._wake.set()

    async def _ensure_topic(self) -> None:
        client = self._client
        md = await client.metadata([self.topic])
        tm = md.topics.get(self.topic)
        if tm is not None and tm.error_code == 0 and tm.partitions:
            return
        body = {
            "topics": [{
                "name": self.topic,
                "num_partitions": 1,
                "replication_factor": max(1, min(REPLICATION_FACTOR, len(md.brokers))),
                "assignments": [],
                "configs": [],
            }],
            "timeout_ms": 30000,
            "validate_only": False,
        }
        resp = await client.request(ApiKey.CREATE_TOPICS, body)
        for t in resp.topics:
            if t.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"CreateTopics {self.topic}: {ErrorCode.of(t.error_code).name}")

    async def _append(self, events: list[AuditEvent]) -> None:
        n = len(events)
        batch = pa.RecordBatch.from_pydict({
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([e.time_ms for e in events], pa.timestamp("ms")),
            "key": pa.array([e.key for e in events], pa.binary()),
            "value": pa.array([e.to_json() for e in events], pa.binary()),
        })
        blob = encode_batch(batch, base_offset=0)
        tm = await self._client.topic(self.topic)
        conn = await self._client.connection(tm.partitions[0].leader)
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [{"name": self.topic, "partition_data": [{"index": 0, "records": blob}]}],
        }
        resp = await conn.request(ApiKey.PRODUCE, conn.version(ApiKey.PRODUCE), body)
        for tr in resp.responses:
            for pr in tr.partition_responses:
                if pr.error_code:
                    raise RuntimeError(f"produce: {ErrorCode.of(pr.error_code).name}")

