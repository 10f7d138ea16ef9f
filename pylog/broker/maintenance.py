"""Storage upkeep off the event loop: retention, compaction and flushing on Kafka's timers.

One daemon thread wakes for the earliest due job (``log.retention.check.interval.ms``,
``log.cleaner.backoff.ms``, ``log.flush.scheduler.interval.ms``) or when the produce
path asks for a flush (``flush.messages`` reached). Each job takes the partition's
lock only for the storage call it makes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pylog.config import BrokerConfig

if TYPE_CHECKING:
    from pylog.broker.partition import Partition
    from pylog.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

MAX_SLEEP_S = 3600.0


class Maintenance:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, now_ms: Callable[[], int]) -> None:
        self.replicas = replicas
        self._now_ms = now_ms
        self.retention_interval_ms = config.int("log.retention.check.interval.ms")
        self.cleaner_interval_ms = (
            config.int("log.cleaner.backoff.ms") if config.bool("log.cleaner.enable") else 0
        )
        self.flush_interval_ms = config.int("log.flush.scheduler.interval.ms")
        self.producer_expiration_ms = config.int("producer.id.expiration.ms")
        self._cond = threading.Condition()
        self._flush_requests: dict[int, Partition] = {}
        self._stop = False
        self._thread: threading.Thread | None = None
        self._due: dict[str, float] = {}
        self._last_flush: dict[int, int] = {}

    def start(self) -> None:
        now = time.monotonic()
        self._due = {
            "retention": now + self.retention_interval_ms / 1000.0,
            "cleaner": now + self.cleaner_interval_ms / 1000.0
            if self.cleaner_interval_ms > 0
            else float("inf"),
            "flush": now + min(self.flush_interval_ms / 1000.0, MAX_SLEEP_S),
        }
        self._thread = threading.Thread(target=self._run, name="pylog-maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def request_flush(self, part: Partition) -> None:
        with self._cond:
            self._flush_requests[id(part)] = part
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stop:
                    return
                if not self._flush_requests:
                    wait = min(self._due.values()) - time.monotonic()
                    if wait > 0:
                        self._cond.wait(min(wait, MAX_SLEEP_S))
                if self._stop:
                    return
                flushes = list(self._flush_requests.values())
                self._flush_requests.clear()
            for part in flushes:
                self._guard("flush", part, part.flush)
            now = time.monotonic()
            if now >= self._due["retention"]:
                self.run_retention()
                self._due["retention"] = time.monotonic() + self.retention_interval_ms / 1000.0
            if now >= self._due["cleaner"]:
                self.run_cleaner()
                self._due["cleaner"] = time.monotonic() + self.cleaner_interval_ms / 1000.0
            if now >= self._due["flush"]:
                self.run_time_flush()
                self._due["flush"] = time.monotonic() + min(self.flush_interval_ms / 1000.0, MAX_SLEEP_S)

    def _guard(self, what: str, part: Partition, fn: Callable[[], object]) -> None:
        if part.deleted:
            return
        try:
            fn()
        except Exception:
            log.exception("%s of %s-%d failed", what, part.topic, part.index)

    def run_retention(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():

            def job(part: Partition = part) -> None:
                with part.lock:
                    if part.deleted:
                        return
                    part.log.apply_retention(now)
                    start = part.log.log_start_offset
                    if part.wire.first_offset is not None and part.wire.first_offset < start:
                        part.wire.clear()
                    part.producers.truncate(start)
                    part.producers.expire(now, self.producer_expiration_ms)

            self._guard("retention", part, job)

    def run_cleaner(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():
            if "compact" not in part.configs.get("cleanup.policy", "delete"):
                continue

            def job(part: Partition = part) -> None:
                with part.lock:
                    if part.deleted:
                        return
                    part.log.compact(now)
                    part.wire.clear()

            self._guard("compaction", part, job)

    def run_time_flush(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():
            flush_ms = part.log_config.flush_ms if hasattr(part.log_config, "flush_ms") else None
            if flush_ms is None or flush_ms >= 2**62:
                continue
            last = self._last_flush.get(id(part), 0)
            if now - last >= flush_ms and part.unflushed:
                self._last_flush[id(part)] = now
                self._guard("flush", part, part.flush)
