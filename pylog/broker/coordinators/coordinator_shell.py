"""What the group and transaction shells share around their sans-IO coordinators.

Both own the partitions of one compacted internal topic that this broker leads, replay them into
the coordinator (on start, or lazily when a request for a partition not loaded yet arrives),
append each call's records there before answering (a failed append reloads the partition: memory
was ahead of the log), and keep one loop timer on the coordinator's `next_deadline_ms()`. The
subclass supplies what differs: how a replayed partition is loaded, what an appended batch or an
unloaded partition means to its coordinator, and what `apply` does with an `Output`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pylog.protocol.errors import ErrorCode

from pylog.broker.coordinators.internal_topics import InternalTopic, append_records_at, batches_by_partition
from pylog.broker.datapath.delayed import await_replication
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import ErrorResponse
from pylog.clock import SYSTEM_CLOCK
from pylog.cluster.controller import NewTopic
from pylog.groups import CoordinatorRecord

if TYPE_CHECKING:
    from pylog.broker.control.controller_client import ControllerClient
    from pylog.broker.control.metadata import MetadataView
    from pylog.broker.datapath.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# What a failed append turns a call's response into (the response shapes of `pylog.groups`).
ResponseOnError = Callable[[Any, ErrorCode], Any]


@dataclass(frozen=True)
class ShellServices:
    """What every coordinator shell works with: this node, its replicas, the metadata it reads, the
    controller that creates its internal topic, and the wall clock in ms."""

    node_id: int
    replicas: ReplicaManager
    metadata: MetadataView
    controller: ControllerClient
    clock: Callable[[], int] = SYSTEM_CLOCK.wall_ms


KeyT = TypeVar("KeyT")
"""What a coordinator is found by: a group id, a transactional id, a share-partition key."""


class CoordinatorShell(Generic[KeyT]):
    """Ownership, persistence and the deadline timer of one internal topic's coordinator."""

    coordinator: Any  # the sans-IO coordinator, None until `start`
    tick_name = "coordinator"  # for the log line of a failed tick

    def __init__(self, topic: str, new_topic: Callable[[], NewTopic], services: ShellServices) -> None:
        self.node_id = services.node_id
        self.replicas = services.replicas
        self.metadata = services.metadata
        self.clock = services.clock
        self.coordinator = None
        self._topic_name = topic
        self._topic = InternalTopic(topic, new_topic, services.metadata, services.controller)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._unreplicated: dict[int, int] = {}  # partition -> last offset appended, until replicated
        self._loaded: set[int] = set()  # partitions the coordinator owns
        self._stopped = False

    # ------------------------------------------------------------------ subclass hooks

    def _load(self, p: int, records: list[Any]) -> None:
        """Hand partition `p`'s replayed records to the coordinator (and mark it loaded)."""
        raise NotImplementedError

    def _read_partition(self, p: int) -> list[Any]:
        """Every record of partition `p`, oldest first, in the form `_load` takes."""
        raise NotImplementedError

    def apply(self, out: Any, on_error: ResponseOnError | None = None) -> Any:
        raise NotImplementedError

    def _records_appended(self, recs: list[CoordinatorRecord], base_offset: int) -> None:
        """One batch of `recs` is in the log at `base_offset`."""

    def _partition_unloaded(self, out: Any) -> None:
        """What `unload_partition` answered, before the partition is replayed again."""

    def _mark_loading(self, p: int) -> None:
        self.coordinator.mark_loading(p)

    def _unload(self, p: int) -> Any:
        """Drop partition `p` from the coordinator(s); returns what its unload answered."""
        return self.coordinator.unload_partition(p)

    def _next_deadline(self) -> int | None:
        return self.coordinator.next_deadline_ms()

    def _tick(self, now_ms: int) -> None:
        self.apply(self.coordinator.tick(now_ms))

    # ------------------------------------------------------------------ leadership entry points

    def load_partition(self, p: int) -> None:
        """This broker became leader of partition `p` of the internal topic: replay it."""
        if self.coordinator is None or self._stopped:
            return
        self._mark_loading(p)
        self._load(p, self._read_partition(p))
        self._reschedule()

    def unload_partition(self, p: int) -> None:
        """This broker stopped leading partition `p`: forget its state (requests then get
        NOT_COORDINATOR) and fail what waits on it."""
        if self.coordinator is None:
            return
        self._partition_unloaded(self._unload(p))
        self._loaded.discard(p)
        self._reschedule()

    # ------------------------------------------------------------------ lifecycle

    async def _replay_led_partitions(self) -> None:
        """Mark every led partition loading, then replay them one by one (start)."""
        loop = asyncio.get_running_loop()
        led = self._led_partitions()
        for p in led:
            self._mark_loading(p)
        for p in led:
            records = await loop.run_in_executor(None, self._read_partition, p)
            self._load(p, records)
        self._reschedule()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------------ ownership

    def leaders(self) -> dict[int, int] | None:
        """Leader of each partition of the internal topic; None while the topic does not exist."""
        return self._topic.leaders()

    def partition_for(self, key: KeyT) -> int:
        raise NotImplementedError

    def _led_partitions(self) -> list[int]:
        me = self.node_id
        return [
            p
            for p, leader in sorted((self.leaders() or {}).items())
            if leader == me and self.replicas.get(self._topic_name, p) is not None
        ]

    def become_leader(self, p: int) -> None:
        """This broker now leads partition `p` of the internal topic: load its state (a shell not
        started yet loads every led partition when it starts)."""
        if self.coordinator is None or self._stopped or p in self._loaded:
            return
        if self.replicas.get(self._topic_name, p) is None:
            return
        self._load(p, self._read_partition(p))
        self._reschedule()

    def resign(self, p: int) -> None:
        """Another broker leads `p` now: drop its state; requests for it get NOT_COORDINATOR."""
        if self.coordinator is None or p not in self._loaded:
            return
        out = self._unload(p)
        self._loaded.discard(p)
        self._partition_unloaded(out)

    def coordinator_error(self, key: KeyT) -> ErrorCode:
        """Why this broker cannot coordinate `key` now (NONE if it can); loads lazily."""
        if self.coordinator is None or self._stopped:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        leaders = self.leaders()
        if leaders is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        p = self.partition_for(key)
        if leaders.get(p) != self.node_id:
            return ErrorCode.NOT_COORDINATOR
        if self.replicas.get(self._topic_name, p) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if p not in self._loaded:
            # Led here but not loaded (created meanwhile, or leadership moved here).
            self._load(p, self._read_partition(p))
            self._reschedule()
        return ErrorCode.NONE

    # ------------------------------------------------------------------ persistence

    def _persist(self, records: list[CoordinatorRecord]) -> ErrorCode:
        """Append `records` (one batch per run); the first error, after reloading what failed."""
        first_error = ErrorCode.NONE
        for p, runs in batches_by_partition(records).items():
            error = self._append_runs(p, runs)
            if error is not ErrorCode.NONE:
                log.error("append to %s-%d failed: %s", self._topic_name, p, error.name)
                self._reload(p)
                if first_error is ErrorCode.NONE:
                    first_error = error
        return first_error

    def _append_runs(self, p: int, runs: list[list[CoordinatorRecord]]) -> ErrorCode:
        for recs in runs:
            part = self.replicas.get(self._topic_name, p)
            if part is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            error, base_offset = append_records_at(part, recs, self.clock())
            if error is not ErrorCode.NONE:
                return error
            self._unreplicated[p] = max(self._unreplicated.get(p, -1), base_offset + len(recs) - 1)
            self._records_appended(recs, base_offset)
        return ErrorCode.NONE

    def pending_replication(self) -> list[tuple[Any, int]]:
        """(partition, last offset) of appends the in-sync replicas do not all have yet."""
        out = []
        for p, last in list(self._unreplicated.items()):
            part = self.replicas.get(self._topic_name, p)
            if part is None or part.high_watermark > last:
                del self._unreplicated[p]
            else:
                out.append((part, last))
        return out

    def _reload(self, p: int) -> None:
        """The log is behind memory for `p`: unload it and replay it."""
        out = self._unload(p)
        self._loaded.discard(p)
        self._partition_unloaded(out)
        if self.replicas.get(self._topic_name, p) is not None:
            try:
                self._load(p, self._read_partition(p))
            except Exception:
                log.exception("reloading %s-%d failed", self._topic_name, p)

    def _log_of(self, p: int) -> Any:
        """The partition log of `p`, None if it is not open here."""
        part = self.replicas.get(self._topic_name, p)
        return part.log if part is not None else None

    # ------------------------------------------------------------------ timers

    def _reschedule(self) -> None:
        if self.coordinator is None or self._stopped:
            return
        deadline = self._next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is not None:
            delay = max(deadline - self.clock(), 0) / 1000.0
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        if self.coordinator is None or self._stopped:
            return
        try:
            self._tick(self.clock())
        except Exception:
            log.exception("%s tick failed", self.tick_name)
            self._reschedule()


def durable(fn: Any, shells: Sequence[CoordinatorShell], timeout_s: float) -> Any:
    """``fn`` (a coordinator API handler) answering only once what it appended to an internal topic
    is on every in-sync replica, as Kafka's coordinators append with acks=all: an acknowledged
    commit survives the loss of its leader. Failing that in time: REQUEST_TIMED_OUT, or
    NOT_COORDINATOR when leadership moved meanwhile."""

    error_response: ErrorResponse | None = getattr(fn, "error_response", None)

    @functools.wraps(fn)
    def handler(ctx: RequestContext, req: Any, **services: Any) -> Any:
        result = fn(ctx, req, **services)
        if not inspect.isawaitable(result) and not any(s.pending_replication() for s in shells):
            return result
        return _answer_when_replicated(result, shells, timeout_s, ctx, req, error_response)

    return handler


async def _answer_when_replicated(
    result: Any,
    shells: Sequence[CoordinatorShell],
    timeout_s: float,
    ctx: RequestContext,
    req: Any,
    error_response: ErrorResponse | None,
) -> Any:
    if inspect.isawaitable(result):
        result = await result
    pending = [item for s in shells for item in s.pending_replication()]
    if not pending:
        return result
    code = ErrorCode.NONE
    for outcome in await await_replication(pending, timeout_s, check_min_isr=False):
        if outcome == ErrorCode.REQUEST_TIMED_OUT:
            code = ErrorCode.REQUEST_TIMED_OUT
        elif outcome:
            code = ErrorCode.NOT_COORDINATOR
    if code is ErrorCode.NONE or result is None or error_response is None or req is None:
        return result
    return error_response(req, code)
