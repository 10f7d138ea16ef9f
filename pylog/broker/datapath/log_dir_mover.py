"""Moving a replica between the log directories of this broker (AlterReplicaLogDirs).

Kafka creates a "future" replica in the destination and lets a ReplicaAlterLogDirsThread fetch into
it from the current log, swapping the two once it caught up. pylog copies files instead, because its
segments are immutable Arrow files that a byte copy reproduces exactly (no re-encoding, no second
write path into a log): copy passes run on a worker thread into ``<topic>-<p>.<id>-future`` while
the partition serves as usual, each pass copying only what changed since the one before; when a
pass copied little, the last one runs on the event loop with the partition's log paused (no
append or read can interleave: both run on the loop; background segment jobs wait on the log
lock), and the partition reopens its log from the new directory. Nothing written is lost: the last
pass copies everything the paused log holds, and the swap is crash-safe (``storage.relocate``).
Before the last passes the active segment is rolled (and the rolled one sealed), so the pause
lasts one copy of what was appended during the pass before it, with its fsyncs and the swap's
(copies are written back as they are made, so no pass leaves much for an fsync to wait on).

Like Kafka's, the request is answered at once and the move runs in the background;
DescribeLogDirs shows the future replica (``is_future_key``) until the swap.

The copy passes are throttled as Kafka's ReplicaAlterLogDirsThread is: every move on the broker
together copies at most ``replica.alter.log.dirs.io.max.bytes.per.second`` (dynamic; measured over
``alter.log.dirs.replication.quota.window.*``), a copy waiting after each chunk while the rate is
over it. The paused last pass is not held: it copies little, and holding it would stall the
partition.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pylog.protocol.errors import ErrorCode
from pylog.storage.relocate import (
    MoveCancelled,
    MoveDirs,
    move_dirs,
    recover_moves,
    swap_in,
    sync_tree,
    tree_size,
)

from pylog.broker.datapath.partition import Partition
from pylog.config import BrokerConfig
from pylog.config_defs import (
    ALTER_LOG_DIRS_IO_RATE,
    ALTER_LOG_DIRS_WINDOW_NUM,
    ALTER_LOG_DIRS_WINDOW_SIZE_SECONDS,
)
from pylog.quotas.replication import UNBOUNDED, ReplicationQuota

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MAX_BACKGROUND_PASSES = 8
LAST_PASS_BYTES = 8 << 20  # a pass copying no more than this is followed by the paused one
RECHECK_MS = 1000  # a held copy reads the rate again at least this often (a lifted throttle lets it go)


@dataclass
class Move:
    """One replica moving to ``dest`` (a configured log dir)."""

    topic: str
    index: int
    dest: Path
    dirs: MoveDirs
    cancelled: threading.Event = field(default_factory=threading.Event)
    copied_bytes: int = 0
    future_bytes: int = 0  # what the future directory holds after the last pass
    passes: int = 0
    paused_bytes: int = 0  # copied by the last pass, with the log paused
    paused_ms: int = 0  # how long the log was paused (the last pass, the swap, the reopening)
    held_ms: int = 0  # how long the throttle held its copy passes
    task: asyncio.Task[None] | None = None


class MoveThrottle:
    """Kafka's alter-log-dirs quota: the bytes/s all moves on this broker copy together. Used from
    the copy threads (one per move), hence the lock."""

    def __init__(self, config: BrokerConfig, now_ms: Callable[[], int]) -> None:
        self._config = config
        self._now_ms = now_ms
        window_s = config.int(ALTER_LOG_DIRS_WINDOW_SIZE_SECONDS)
        self._quota = ReplicationQuota(config.int(ALTER_LOG_DIRS_WINDOW_NUM), window_s * 1000)
        self._lock = threading.Lock()

    def hold_ms(self) -> int:
        """How long a copy must wait before its next chunk (0: go on). The rate is read each time:
        a dynamic change applies to the moves in progress."""
        with self._lock:
            rate = self._config.int(ALTER_LOG_DIRS_IO_RATE)
            if rate >= UNBOUNDED:
                return 0
            now = self._now_ms()
            if rate == 0:  # as Kafka's quota bounded at 0: nothing more while anything was measured
                return RECHECK_MS if self._quota.rate.measure(now) > 0 else 0
            self._quota.update_bound(rate)
            return self._quota.delay_ms(now)

    def record(self, nbytes: int) -> None:
        with self._lock:
            self._quota.record(nbytes, self._now_ms())

    def pace(self, move: Move, nbytes: int) -> None:
        """After a chunk of ``move`` was copied: count it, and hold the copy while the moves
        together are over the rate (a cancelled move stops waiting)."""
        self.record(nbytes)
        while (ms := self.hold_ms()) > 0:
            wait = min(ms, RECHECK_MS)
            move.held_ms += wait
            if move.cancelled.wait(wait / 1000):
                return  # sync_tree stops at its next chunk


class LogDirMover:
    """The moves in progress on this broker, at most one per partition."""

    def __init__(
        self, lookup: Callable[[str, int], Partition | None], now_ms: Callable[[], int], config: BrokerConfig
    ) -> None:
        self._lookup = lookup
        self._now_ms = now_ms
        self.throttle = MoveThrottle(config, now_ms)
        self.moves: dict[TopicPartition, Move] = {}
        self.relocations = 0  # partitions that changed log dir (their directory counts changed)

    def start(self, part: Partition, dest: Path) -> int:
        """Move ``part`` to ``dest`` in the background; the error code for the request's answer.
        A request naming the current directory cancels a move in progress; naming another
        destination replaces it, as a new future replica does in Kafka."""
        tp = (part.topic, part.index)
        running = self.moves.get(tp)
        if running is not None:
            if running.dest == dest:
                return ErrorCode.NONE
            running.cancelled.set()
        if part.path.parent == dest:
            return ErrorCode.NONE
        move = Move(part.topic, part.index, dest, move_dirs(part.path, dest, uuid.uuid4().hex))
        self.moves[tp] = move
        previous = running.task if running is not None else None
        move.task = asyncio.get_running_loop().create_task(self._run(move, previous))
        return ErrorCode.NONE

    def close(self) -> None:
        """Call off every move: each stops at its next file or chunk, or before its paused pass, and
        removes its future (else the next start does). Safe from any thread."""
        for move in list(self.moves.values()):
            move.cancelled.set()

    async def _run(self, move: Move, previous: asyncio.Task[None] | None) -> None:
        tp = (move.topic, move.index)
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            await self._copy(move)
            log.info("moved %s-%d to %s: %d bytes copied in %d passes, %d in the last (log paused %d ms, "
                     "copies held %d ms by %s)", move.topic, move.index, move.dest, move.copied_bytes,
                     move.passes, move.paused_bytes, move.paused_ms, move.held_ms, ALTER_LOG_DIRS_IO_RATE)
        except MoveCancelled:
            log.info("move of %s-%d to %s called off", move.topic, move.index, move.dest)
            shutil.rmtree(move.dirs.future, ignore_errors=True)
        except asyncio.CancelledError:
            move.cancelled.set()
            raise
        except OSError as exc:
            part = self._lookup(move.topic, move.index)
            gone = part is None or part.deleted or move.cancelled.is_set()  # its files went meanwhile
            (log.info if gone else log.error)("moving %s-%d to %s failed: %s", move.topic, move.index,
                                              move.dest, exc)
            shutil.rmtree(move.dirs.future, ignore_errors=True)
        finally:
            if self.moves.get(tp) is move:
                del self.moves[tp]

    def _current(self, move: Move) -> Partition:
        part = self._lookup(move.topic, move.index)
        if part is None or part.deleted or move.cancelled.is_set():
            raise MoveCancelled(f"{move.topic}-{move.index}")
        return part

    async def _copy(self, move: Move) -> None:
        since, previous = 0, None
        pace = functools.partial(self.throttle.pace, move)
        for _ in range(MAX_BACKGROUND_PASSES):
            part = self._current(move)
            copied, since, move.future_bytes = await asyncio.to_thread(
                _background_pass, part.path, move.dirs.future, since, move.cancelled, pace
            )
            move.copied_bytes += copied
            move.passes += 1
            if copied <= LAST_PASS_BYTES or (previous is not None and copied >= previous):
                break  # little left, or no longer shrinking (the active segment grows meanwhile)
            previous = copied
        # The active segment changes with every append, so every pass copies it again: roll it and
        # seal what rolled (as the maintenance thread would), so that the paused pass copies only
        # the records appended since the pass before it.
        part = self._current(move)
        part.log.roll()
        await asyncio.to_thread(part.seal_rolled_segments)
        part = self._current(move)
        copied, since, move.future_bytes = await asyncio.to_thread(
            _background_pass, part.path, move.dirs.future, since, move.cancelled, pace
        )
        move.copied_bytes += copied
        move.passes += 1
        part = self._current(move)
        source = part.path
        started_ms = self._now_ms()
        with part.lock, part.log.paused():  # the last pass: nothing else runs on the loop meanwhile
            move.paused_bytes = sync_tree(source, move.dirs.future, since)[0]
            self.throttle.record(move.paused_bytes)  # counted, never held
            move.copied_bytes += move.paused_bytes
            move.passes += 1
            part.log.close()
        try:
            final = swap_in(source, move.dirs)
        except OSError:
            recover_moves([source.parent, move.dest])  # whichever copy is complete stays
            final = source if source.is_dir() else move.dest / source.name
            part.relocate(final, self._now_ms())
            self.relocations += 1
            raise
        part.relocate(final, self._now_ms())
        self.relocations += 1
        move.paused_ms = self._now_ms() - started_ms


def _background_pass(
    src: Path, dst: Path, since: int, cancelled: threading.Event, pace: Callable[[int], None]
) -> tuple[int, int, int]:
    """One copy pass on a worker thread: (bytes copied, the next pass's ``since``, the future's
    size)."""
    copied, next_since = sync_tree(src, dst, since, cancelled, pace)
    return copied, next_since, tree_size(dst)
