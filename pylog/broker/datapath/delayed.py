"""Delayed operations (Kafka's purgatory): what waits on a partition, and the two waits built on it.

Theory of operation. Every partition has one ``Watchers``: callbacks registered by requests that
cannot be answered yet, each called once by the event that may complete it, never by a timer
loop. A consumer's fetch waits for the high watermark to move (records below it become
readable), a follower's for the log to grow, an acks=all produce for the high watermark to pass
its batch, DeleteRecords for a follower to report a new log start (the low watermark). A role
change, truncation or deletion wakes every waiter, so each looks again and answers with what is
true now.

``await_replication`` is the delayed produce (acks=all appends, coordinators' writes,
transaction markers): it answers per partition once the high watermark passed the batch, with
the partition's error if it stopped leading, or REQUEST_TIMED_OUT. ``delayed_fetch`` is the
delayed fetch: it rebuilds a fetch answer each time a watched partition wakes it, until the
answer is complete (``min_bytes``, an error) or ``max_wait_ms`` passes. Both run on the event
loop; the partitions call the watchers from appends, follower fetches and role changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from pylog.protocol.errors import ErrorCode

Wake = Callable[[], None]
HwWaiter = Callable[[int], None]  # called with an error code (0: the high watermark passed)
T = TypeVar("T")


class Watched(Protocol):
    """What a delayed operation needs of a partition (``Partition`` is one): its watchers, the
    high-watermark wait and the min.insync.replicas check."""

    @property
    def watchers(self) -> Watchers: ...

    def add_hw_waiter(self, offset: int, callback: HwWaiter) -> None: ...

    def enough_replicas(self) -> bool: ...


class Watchers:
    """The callbacks waiting on one partition; each is called once, then forgotten."""

    __slots__ = ("_hw_readers", "_log_end_readers", "_log_start", "_replication")

    def __init__(self) -> None:
        self._hw_readers: list[Wake] = []  # consumers' fetches: the high watermark moved
        self._log_end_readers: list[Wake] = []  # followers' fetches: the log grew
        self._log_start: list[Wake] = []  # DeleteRecords: a follower reported its log start
        self._replication: list[tuple[int, HwWaiter]] = []  # (offset to pass, callback)

    # --- registration -----------------------------------------------------------------------

    def add_fetch(self, wake: Wake, *, to_log_end: bool = False) -> None:
        """``wake`` once there may be more to read: for a fetch that reads to the log end (a
        follower's) when the log grows, for one that reads to the high watermark (a consumer's)
        when that moves; for both on truncation, deletion or a role change."""
        (self._log_end_readers if to_log_end else self._hw_readers).append(wake)

    def remove_fetch(self, wake: Wake) -> None:
        for waiters in (self._hw_readers, self._log_end_readers):
            with contextlib.suppress(ValueError):
                waiters.remove(wake)

    def add_low_watermark(self, wake: Wake) -> None:
        """``wake`` once a follower reports another log start offset, or the role changes."""
        self._log_start.append(wake)

    def remove_low_watermark(self, wake: Wake) -> None:
        with contextlib.suppress(ValueError):
            self._log_start.remove(wake)

    def add_replication(self, offset: int, callback: HwWaiter) -> None:
        """``callback(0)`` once the high watermark is past ``offset``, ``callback(error)`` if the
        replica stops leading first (see ``Partition.add_hw_waiter``)."""
        self._replication.append((offset, callback))

    def remove_replication(self, callback: HwWaiter) -> None:
        self._replication = [(o, cb) for o, cb in self._replication if cb is not callback]

    # --- events -------------------------------------------------------------------------------

    def log_grew(self) -> None:
        if self._log_end_readers:
            waiters, self._log_end_readers = self._log_end_readers, []
            for cb in waiters:
                cb()

    def high_watermark_moved(self, high_watermark: int) -> None:
        if self._replication:
            due = [cb for o, cb in self._replication if o < high_watermark]
            if due:
                self._replication = [(o, cb) for o, cb in self._replication if o >= high_watermark]
                for cb in due:
                    cb(0)
        if self._hw_readers:
            waiters, self._hw_readers = self._hw_readers, []
            for wake in waiters:
                wake()

    def log_start_reported(self) -> None:
        if self._log_start:
            waiters, self._log_start = self._log_start, []
            for cb in waiters:
                cb()

    def wake_all(self) -> None:
        """Something changed (truncation, deletion, a role, a marker): every waiting fetch and
        DeleteRecords looks again (waiting produces stay until the high watermark or a failure)."""
        self.log_grew()
        if self._hw_readers:
            waiters, self._hw_readers = self._hw_readers, []
            for cb in waiters:
                cb()
        self.log_start_reported()

    def fail_replication(self, code: int) -> None:
        waiters, self._replication = self._replication, []
        for _, cb in waiters:
            cb(code)


async def await_replication(
    waits: Sequence[tuple[Watched, int]], timeout_s: float, *, check_min_isr: bool = True
) -> list[int]:
    """The delayed produce: for each (partition, last offset of a batch appended as leader), 0 once
    the high watermark passed it (every in-sync replica has it), the partition's error if it
    stopped leading, REQUEST_TIMED_OUT if neither happened in ``timeout_s`` (the records stay in
    the log, as in Kafka). With ``check_min_isr``, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
    had shrunk below ``min.insync.replicas`` by the time the high watermark passed."""
    loop = asyncio.get_running_loop()
    pending = []
    for part, last in waits:
        fut: asyncio.Future[int] = loop.create_future()

        def done(code: int, fut: asyncio.Future[int] = fut, part: Watched = part) -> None:
            if not fut.done():
                if code == 0 and check_min_isr and not part.enough_replicas():
                    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                fut.set_result(code)

        part.add_hw_waiter(last, done)
        pending.append((part, fut, done))
    futures = [f for _, f, _ in pending if not f.done()]
    if futures:
        await asyncio.wait(futures, timeout=max(timeout_s, 0))
    codes = []
    for part, fut, done in pending:
        if fut.done():
            codes.append(fut.result())
        else:
            part.watchers.remove_replication(done)
            codes.append(ErrorCode.REQUEST_TIMED_OUT)
    return codes


async def delayed_fetch(
    watched: Sequence[Watched],
    *,
    to_log_end: bool,
    max_wait_ms: int,
    build: Callable[[], tuple[T, bool]],
    stopping: Callable[[], bool],
) -> T:
    """The delayed fetch: wait on ``watched`` and call ``build`` (returning the answer and whether
    it is complete) once per wake-up, until it is complete, ``max_wait_ms`` passed, or the broker
    is stopping; the last answer built is returned."""
    loop = asyncio.get_running_loop()
    current: list[asyncio.Future[None]] = []
    expired: list[bool] = []

    def wake() -> None:
        if current and not current[-1].done():
            current[-1].set_result(None)

    def expire() -> None:
        expired.append(True)  # the timer may run a little before loop.time() reaches its deadline
        wake()

    timer = loop.call_later(max_wait_ms / 1000.0, expire)  # one timer per waiting fetch
    try:
        while True:
            current[:] = [loop.create_future()]
            for part in watched:
                part.watchers.add_fetch(wake, to_log_end=to_log_end)
            try:
                await current[-1]
            finally:
                for part in watched:
                    part.watchers.remove_fetch(wake)
            answer, complete = build()
            if complete or expired or stopping():
                return answer
    finally:
        timer.cancel()
