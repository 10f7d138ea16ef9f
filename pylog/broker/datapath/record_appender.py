"""The append path (Kafka's ReplicaManager.appendRecords and DelayedProduce): the checks before a
batch reaches a leader's partition, the append, and the wait of acks=all. Kept apart from the
fetch path so the rules a produce must pass live in one place.

Per partition: it exists, it is not internal unless the caller is a coordinator, this broker
leads it, acks=all has enough in-sync replicas, the record check accepts it; then
``Partition.append_as_leader`` (the only way a batch enters a leader's log), then, for acks=all,
the delayed produce (``delayed.await_replication``). Transaction markers come through
``append_txn_marker``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.protocol.errors import ErrorCode

from pylog.broker.control.metadata import INTERNAL_TOPICS
from pylog.broker.datapath.delayed import await_replication
from pylog.broker.datapath.partition import AppendOrigin, AppendResult, Partition
from pylog.broker.datapath.transactions import marker_batch
from pylog.metrics.counters import TopicStats

# (topic, topic configs, records) -> why the records are refused (INVALID_RECORD), or None
RecordCheck = Callable[[str, Mapping[str, str], Any], "str | None"]


@dataclass(slots=True)
class ProduceResult:
    """The answer of ``append_records``: one result per partition, in the order asked, and the
    delayed produce completing the acks=all ones in place (None when nothing waits)."""

    results: list[AppendResult]
    delayed: Awaitable[None] | None = None

    @property
    def failed(self) -> bool:
        return any(r.error for r in self.results)


class RecordAppender:
    def __init__(
        self,
        get: Callable[[str, int], Partition | None],
        absent_error: Callable[[str, int], int],
        now_ms: Callable[[], int],
        stats: TopicStats | None = None,
    ) -> None:
        self._get = get
        self._absent_error = absent_error
        self._now_ms = now_ms
        self.stats = stats or TopicStats()

    def append_records(
        self,
        entries: Iterable[tuple[str, int, Any]],
        *,
        acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        record_check: RecordCheck | None = None,
    ) -> ProduceResult:
        """Append one batch per (topic, partition, records) as leader, with ``acks`` 0 / 1 / -1
        (all); a result per entry, errors as data. ``record_check`` may refuse a partition's
        records (INVALID_RECORD with its message) before they are appended; only a coordinator
        writes internal topics."""
        now = self._now_ms()
        results: list[AppendResult] = []
        waiting: list[tuple[AppendResult, Partition]] = []  # acks=all, until replicated
        bad_acks = acks not in (-1, 0, 1)
        internal_allowed = origin is AppendOrigin.COORDINATOR
        check = record_check or _accept
        for topic, index, records in entries:
            part = self._get(topic, index)
            if bad_acks:
                res = AppendResult(ErrorCode.INVALID_REQUIRED_ACKS)
            elif part is None:
                res = AppendResult(self._absent_error(topic, index))
            elif topic in INTERNAL_TOPICS and not internal_allowed:
                # Only the coordinators write there (Kafka: "Cannot append to internal topic").
                res = AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION)
            elif not part.is_leader:
                res = AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER, current_leader=part.current_leader)
            elif acks == -1 and not part.enough_replicas():
                res = AppendResult(
                    ErrorCode.NOT_ENOUGH_REPLICAS,
                    message=f"The ISR {list(part.isr)} is smaller than "
                    f"min.insync.replicas={part.min_insync_replicas}",
                )
            elif (refusal := check(topic, part.configs, records)) is not None:
                res = AppendResult(ErrorCode.INVALID_RECORD, message=refusal)
            else:
                res = part.append_as_leader(records, now, origin)
                if res.error == 0:
                    self.stats.appended(topic, res.last_offset - res.base_offset + 1, len(records))
                if acks == -1 and res.error == 0 and part.high_watermark <= res.last_offset:
                    waiting.append((res, part))
            results.append(res)
        if not waiting:
            return ProduceResult(results)
        return ProduceResult(results, self._delayed_produce(waiting, timeout_ms))

    async def _delayed_produce(self, waiting: list[tuple[AppendResult, Partition]], timeout_ms: int) -> None:
        waits = [(part, res.last_offset) for res, part in waiting]
        codes = await await_replication(waits, timeout_ms / 1000)
        for (res, _), code in zip(waiting, codes):
            if code:
                res.error = code
                res.message = ErrorCode.of(code).name

    def append_txn_marker(
        self,
        topic: str,
        index: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        on_done: Callable[[ErrorCode], None],
    ) -> None:
        """Append a COMMIT / ABORT marker for the producer here (its leader) and call ``on_done``
        once the in-sync replicas hold it (markers are written with acks=all), or with the error."""
        part = self._get(topic, index)
        if part is None:
            on_done(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return
        now = self._now_ms()
        marker = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now)
        res = part.append_as_leader(marker, now, AppendOrigin.COORDINATOR)
        if res.error:
            on_done(ErrorCode.of(res.error))
            return
        part.add_hw_waiter(res.last_offset, lambda code: on_done(ErrorCode.of(code)))


def _accept(topic: str, configs: Mapping[str, str], records: Any) -> None:
    return None
