"""Storage upkeep off the event loop: sealing, retention, compaction and time-based flushes.

One daemon thread wakes for the earliest due job or when a partition asks for
work (its active segment rolled, so the rolled IPC stream can be sealed into an
IPC file). Under ``pylog.segment.format=2`` the same pass rewrites sealed format 1
segments as format 2, one segment per partition per pass, from start-up on.
Timers follow Kafka's names: ``log.retention.check.interval.ms``,
``log.cleaner.backoff.ms`` (compacted topics), ``log.flush.scheduler.interval.ms``
(topics with ``flush.ms``); ``pylog.memory.release.interval.ms`` returns freed
memory to the kernel. The partition log is thread-safe and swaps rewritten
files in under its own lock, so the event loop keeps appending and reading.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pylog.broker.datapath.memory import release_unused_memory
from pylog.clock import Clock
from pylog.config import BrokerConfig
from pylog.model import LONG_MAX

if TYPE_CHECKING:
    from pylog.broker.datapath.partition import Partition
    from pylog.broker.datapath.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

MAX_SLEEP_S = 3600.0
FLUSH_CHECK_S = 1.0  # when log.flush.scheduler.interval.ms is unset but a topic has flush.ms
RELEASE_SOON_S = 0.5  # after a bulk free: long enough for a burst of deletions to finish


class Maintenance:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, clock: Clock) -> None:
        self.replicas = replicas
        self._now_ms = clock.wall_ms  # stamps compared with record times (retention)
        self._monotonic_s = clock.monotonic_s  # when each job is due
        self.retention_s = config.int("log.retention.check.interval.ms") / 1000.0
        self.cleaner_s = (
            config.int("log.cleaner.backoff.ms") / 1000.0 if config.bool("log.cleaner.enable") else None
        )
        scheduler_ms = config.int("log.flush.scheduler.interval.ms")
        self.flush_s = FLUSH_CHECK_S if scheduler_ms >= LONG_MAX else scheduler_ms / 1000.0
        self.producer_expiration_ms = config.int("producer.id.expiration.ms")
        self.checkpoint_s = config.int("replica.high.watermark.checkpoint.interval.ms") / 1000.0
        release_ms = config.int("pylog.memory.release.interval.ms")
        self.release_s = release_ms / 1000.0 if release_ms > 0 else None
        self._cond = threading.Condition()
        self._seal: dict[int, Partition] = {}
        self._stop = False
        self._thread: threading.Thread | None = None
        self._due: dict[str, float] = {}

    def start(self) -> None:
        now = self._monotonic_s()
        self._due = {
            "retention": now + self.retention_s,
            "cleaner": now + self.cleaner_s if self.cleaner_s is not None else float("inf"),
            "flush": now + self.flush_s,
            "release": now + self.release_s if self.release_s is not None else float("inf"),
            "checkpoint": now + self.checkpoint_s,
        }
        for part in self.replicas.snapshot():  # segments rolled before a restart
            self._seal[id(part)] = part
        self._thread = threading.Thread(target=self._run, name="pylog-maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def request_seal(self, part: Partition) -> None:
        """A partition rolled its active segment (called on the event loop)."""
        with self._cond:
            self._seal[id(part)] = part
            self._cond.notify()

    def request_release(self) -> None:
        """Memory was freed in bulk (a topic deleted): return it to the kernel soon."""
        if self.release_s is None:
            return
        with self._cond:
            self._due["release"] = min(self._due.get("release", 0.0), self._monotonic_s() + RELEASE_SOON_S)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._seal and not self._stop:
                    wait = min(self._due.values()) - self._monotonic_s()
                    if wait > 0:
                        self._cond.wait(min(wait, MAX_SLEEP_S))
                if self._stop:
                    return
                seal = list(self._seal.values())
                self._seal.clear()
            for part in seal:
                self._guard("sealing", part, part.seal_rolled_segments)
                if part.one_copy:  # one old segment at a time, then the other jobs get a turn
                    self._guard("format upgrade", part, functools.partial(self._upgrade, part))
            now = self._monotonic_s()
            if now >= self._due["retention"]:
                self.run_retention()
                self._due["retention"] = self._monotonic_s() + self.retention_s
            if now >= self._due["cleaner"]:
                self.run_cleaner()
                self._due["cleaner"] = self._monotonic_s() + (self.cleaner_s or MAX_SLEEP_S)
            if now >= self._due["flush"]:
                self.run_time_flush()
                self._due["flush"] = self._monotonic_s() + self.flush_s
            if now >= self._due["checkpoint"]:
                try:
                    self.replicas.checkpoint_high_watermarks()
                except OSError:
                    log.exception("writing the high watermark checkpoint failed")
                self._due["checkpoint"] = self._monotonic_s() + self.checkpoint_s
            if now >= self._due["release"]:
                release_unused_memory()
                self._due["release"] = self._monotonic_s() + (self.release_s or MAX_SLEEP_S)

    def _upgrade(self, part: Partition) -> None:
        """Rewrite one sealed format 1 segment of ``part`` as format 2; ask again while any is left."""
        if part.upgrade_segments(1):
            with self._cond:
                self._seal[id(part)] = part

    def _guard(self, what: str, part: Partition, fn: Callable[[], object]) -> None:
        if part.deleted:
            return
        try:
            fn()
        except Exception:
            if not part.deleted:
                log.exception("%s of %s-%d failed", what, part.topic, part.index)

    def run_retention(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():
            retain = functools.partial(part.apply_retention, now, self.producer_expiration_ms)
            self._guard("retention", part, retain)

    def run_cleaner(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():
            if part.log_config.compact:
                self._guard("compaction", part, functools.partial(part.compact, now))

    def run_time_flush(self) -> None:
        now = self._now_ms()
        for part in self.replicas.snapshot():
            if part.log_config.flush_ms < LONG_MAX:
                self._guard("flush", part, functools.partial(part.flush_if_due, now))
