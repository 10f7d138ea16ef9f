"""Delayed operations (Kafka's purgatory): what waits on a partition, and the deterministic delayed
produce and delayed fetch built on it.

Theory of operation. Every partition has one ``Watchers``: callbacks registered by requests that
cannot be answered yet, each called once by the event that may complete it. A consumer's fetch
waits for the high watermark to move (records below it become readable), a follower's for the log
to grow, an acks=all produce for the high watermark to pass its batch, DeleteRecords for a
follower to report a new log start (the low watermark). A role change, truncation or deletion
wakes every waiter, so each looks again and answers with what is true now.

``DelayedProduce`` (acks=all appends, transaction markers, coordinators' writes) and
``DelayedFetch`` are pending operations kept in a ``Purgatory``. A partition event only marks an
operation ready (and calls the purgatory's ``notify``); nothing completes outside
``Purgatory.tick(now)``, which completes the ready operations and those whose deadline ``now``
passed, in a fixed order. The purgatory reads no clock and does no I/O: the replica manager's
asyncio shell ticks it soon after a notify and when the earliest deadline comes, a simulation
ticks it with simulated time.

A delayed produce answers per partition once the high watermark passed the batch (with
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR had shrunk below ``min.insync.replicas`` by then),
with the partition's error if it stopped leading, or REQUEST_TIMED_OUT at its deadline (the
records stay in the log, as in Kafka). A delayed fetch rebuilds its answer each time a watched
partition wakes it, until the answer is complete (``min_bytes``, an error), the deadline passed,
or the broker is stopping.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

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


class DelayedOperation:
    """A request that waits in the purgatory (Kafka's DelayedOperation): completed once, by
    ``Purgatory.tick``, when ``try_complete`` says so; ``on_complete`` is then called with it."""

    deadline_ms: int | None  # None: no timeout (a transaction marker)

    def __init__(self, deadline_ms: int | None) -> None:
        self.deadline_ms = deadline_ms
        self.done = False
        self.on_complete: Callable[[DelayedOperation], None] | None = None
        self._notify: Callable[[DelayedOperation], None] = _ignore

    def expired(self, now_ms: int) -> bool:
        return self.deadline_ms is not None and now_ms >= self.deadline_ms

    def watch(self, notify: Callable[[DelayedOperation], None]) -> None:
        """Register on the partitions; ``notify(self)`` whenever one may let it complete."""
        self._notify = notify

    def try_complete(self, now_ms: int, *, woken: bool) -> bool:
        """Complete if possible (``woken``: an event marked it ready since the last try); True
        once complete, its watches removed."""
        raise NotImplementedError


def _ignore(_op: DelayedOperation) -> None:
    return None


class DelayedProduce(DelayedOperation):
    """Waits for the high watermark to pass each (partition, last offset of its batch);
    ``codes`` holds each partition's outcome (None while waiting)."""

    def __init__(
        self, waits: Sequence[tuple[Watched, int]], deadline_ms: int | None, *, check_min_isr: bool = True
    ) -> None:
        super().__init__(deadline_ms)
        self.waits = list(waits)
        self.check_min_isr = check_min_isr
        self.codes: list[int | None] = [None] * len(self.waits)
        self._callbacks: list[HwWaiter] = []

    def watch(self, notify: Callable[[DelayedOperation], None]) -> None:
        super().watch(notify)
        for i, (part, last) in enumerate(self.waits):
            callback = self._outcome(i, part)
            self._callbacks.append(callback)
            part.add_hw_waiter(last, callback)

    def _outcome(self, i: int, part: Watched) -> HwWaiter:
        def callback(code: int) -> None:
            if self.codes[i] is None:
                if code == 0 and self.check_min_isr and not part.enough_replicas():
                    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                self.codes[i] = code
                self._notify(self)

        return callback

    def try_complete(self, now_ms: int, *, woken: bool) -> bool:
        if any(c is None for c in self.codes):
            if not self.expired(now_ms):
                return False
            self.expire()
        return True

    def expire(self) -> None:
        """The deadline passed: every partition still waiting answers REQUEST_TIMED_OUT."""
        for i, (part, _) in enumerate(self.waits):
            if self.codes[i] is None:
                part.watchers.remove_replication(self._callbacks[i])
                self.codes[i] = ErrorCode.REQUEST_TIMED_OUT


class DelayedFetch(DelayedOperation, Generic[T]):
    """Waits on ``watched`` for more to read: each wake-up rebuilds the answer with ``build(now)``
    (the answer and whether it is complete) until it is complete, the deadline passed or
    ``stopping()``; ``result`` is the last answer built."""

    def __init__(
        self,
        watched: Sequence[Watched],
        *,
        to_log_end: bool,
        deadline_ms: int,
        build: Callable[[int], tuple[T, bool]],
        first: T,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(deadline_ms)
        self.watched = list(watched)
        self.to_log_end = to_log_end
        self.build = build
        self.result = first
        self.stopping = stopping

    def watch(self, notify: Callable[[DelayedOperation], None]) -> None:
        super().watch(notify)
        self._register()

    def _register(self) -> None:
        for part in self.watched:
            part.watchers.add_fetch(self._wake, to_log_end=self.to_log_end)

    def _unregister(self) -> None:
        for part in self.watched:
            part.watchers.remove_fetch(self._wake)

    def _wake(self) -> None:
        self._notify(self)

    def try_complete(self, now_ms: int, *, woken: bool) -> bool:
        expired = self.expired(now_ms)
        if not woken and not expired:
            return False
        self._unregister()  # each watcher is called once: watch again after a rebuild
        answer, complete = self.build(now_ms)
        self.result = answer
        if complete or expired or self.stopping():
            return True
        self._register()
        return False


class Purgatory:
    """The pending delayed operations of one broker; deterministic: ``tick(now)`` alone completes
    them, each tick touching only the operations made ready and those past their deadline.
    ``notify`` (set by a shell) is called when a pending operation became ready."""

    def __init__(self) -> None:
        self._pending: dict[DelayedOperation, int] = {}  # -> the order it was added in
        self._ready: dict[DelayedOperation, None] = {}
        self._deadlines: list[tuple[int, int, DelayedOperation]] = []  # heap; done ones linger
        self._added = itertools.count()
        self.notify: Callable[[], None] = lambda: None

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, op: DelayedOperation, now_ms: int) -> bool:
        """Watch ``op`` (Kafka's tryCompleteElseWatch); True if it completed at once (then it is
        not kept, and ``on_complete`` is not called)."""
        op.watch(self._mark_ready)
        woken = op in self._ready
        self._ready.pop(op, None)
        if op.try_complete(now_ms, woken=woken):
            op.done = True
            return True
        order = next(self._added)
        self._pending[op] = order
        if op.deadline_ms is not None:
            heapq.heappush(self._deadlines, (op.deadline_ms, order, op))
        return False

    def _mark_ready(self, op: DelayedOperation) -> None:
        if op not in self._ready:
            self._ready[op] = None
            if op in self._pending:
                self.notify()

    def next_deadline(self) -> int | None:
        """The earliest deadline of a pending operation (None: none has one)."""
        heap = self._deadlines
        while heap and heap[0][2].done:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def tick(self, now_ms: int) -> list[DelayedOperation]:
        """Complete the ready operations and those past their deadline, in the order they were
        added; the operations completed (their ``on_complete`` not yet called)."""
        ready, self._ready = self._ready, {}
        due = {op: None for op in ready if op in self._pending}
        heap = self._deadlines
        while heap and (heap[0][2].done or heap[0][0] <= now_ms):
            op = heapq.heappop(heap)[2]
            if not op.done:
                due[op] = None
        done = []
        for op in sorted(due, key=self._pending.__getitem__):
            if op.try_complete(now_ms, woken=op in ready):
                op.done = True
                del self._pending[op]
                done.append(op)
        return done  # an expired operation always completes: none is left out of the heap


async def await_replication(
    waits: Sequence[tuple[Watched, int]], timeout_s: float, *, check_min_isr: bool = True
) -> list[int]:
    """A delayed produce awaited on its own (a coordinator's writes): for each (partition, last
    offset of a batch appended as leader), its ``DelayedProduce`` outcome, REQUEST_TIMED_OUT for
    those still waiting after ``timeout_s``."""
    op = DelayedProduce(waits, None, check_min_isr=check_min_isr)
    done = asyncio.get_running_loop().create_future()

    def check(_op: DelayedOperation) -> None:
        if not done.done() and op.try_complete(0, woken=True):
            done.set_result(None)

    op.watch(check)
    check(op)
    if not done.done():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(done), max(timeout_s, 0))
    op.expire()
    return [c if c is not None else ErrorCode.REQUEST_TIMED_OUT for c in op.codes]
