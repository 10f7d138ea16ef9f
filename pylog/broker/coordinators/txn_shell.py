"""The asyncio shell around the sans-IO transaction coordinator: log, markers, timers, producer ids.

`pylog.txn.TransactionCoordinator` decides; this shell does what it cannot:

* Durability. A call's `Output.records` are appended to `__transaction_state` (through the
  partition layer) before anything else happens: only then is the response sent and are the
  markers written. A failed append answers with Kafka's mapped error and reloads the partition
  from the log (the in-memory state was ahead of it); transactions the reload finds preparing get
  their markers again.
* Markers. Each COMMIT / ABORT marker is a control batch appended by the transaction's
  partition leader: here (`ReplicaManager.append_txn_marker`), or on another broker through
  WriteTxnMarkers (`txn_markers.MarkerWriter`). A marker counts once the partition's in-sync
  replicas hold it; a marker in `__consumer_offsets` also completes the group coordinator's
  pending TxnOffsetCommit offsets there. Written markers are reported back, which persists
  CompleteCommit / CompleteAbort. Markers that could not be written (a storage error, a leader
  moving) are retried on a timer; a partition whose topic was deleted counts as done. Markers
  for partitions led here are appended right after the Prepare record, before the EndTxn answer
  leaves, so a client that sees its commit acknowledged finds the records readable there.
* Time. One loop timer sleeps until `next_deadline_ms()` (timed-out transactions, idle ids).
* Producer ids. The core's allocator takes a spare id the shell reserved beforehand (ids come in
  blocks reserved through the metadata log, which may need an await).
* Ownership, as in the group shell: the `__transaction_state` partitions this broker leads,
  replayed on start before the listener opens, the topic created on the first FindCoordinator
  for a transactional id.

Transactional produce requests are verified here (`verify_produce`, installed on every
partition): the batch's producer must have the partition in its Ongoing transaction.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pylog.protocol.errors import ErrorCode

from pylog.broker.coordinators.coordinator_shell import CoordinatorShell, ResponseOnError, ShellServices
from pylog.broker.coordinators.internal_topics import iter_log_entries, plain_records
from pylog.cluster.controller import NewTopic
from pylog.config import BROKER_CONFIGS
from pylog.groups import append_error_to_response
from pylog.txn import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    Output,
    TransactionCoordinator,
    TxnConfig,
    TxnMarkers,
    partition_for,
)

if TYPE_CHECKING:
    from pylog.broker.coordinators.group_shell import GroupShell
    from pylog.broker.coordinators.producer_ids import ProducerIdManager
    from pylog.broker.coordinators.txn_markers import MarkerWriter
    from pylog.config import BrokerConfig

log = logging.getLogger(__name__)

MARKER_RETRY_S = 0.1


class TxnShell(CoordinatorShell[str]):
    """Owns the broker's TransactionCoordinator; request handlers call it through this object."""

    coordinator: TransactionCoordinator | None
    tick_name = "transaction coordinator"

    def __init__(
        self,
        config: BrokerConfig,
        services: ShellServices,
        *,
        producer_ids: ProducerIdManager,
        groups: GroupShell,
        markers: MarkerWriter,
    ) -> None:
        super().__init__(TRANSACTION_STATE_TOPIC, self._state_topic, services)
        self.broker_config = config
        self.producer_ids = producer_ids
        self.groups = groups
        self.markers = markers
        props = {n: config.raw(n) for n in BROKER_CONFIGS}
        self.config = TxnConfig.from_kafka({k: str(v) for k, v in props.items() if v is not None})
        self._spare_pid: int | None = None
        self._marker_retry: asyncio.TimerHandle | None = None
        self._in_flight: set[tuple[int, int, str, int]] = set()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Build the coordinator and replay the partitions of `__transaction_state` led here."""
        leaders = self.leaders()
        n = self.config.transaction_state_log_num_partitions
        if leaders is not None and len(leaders) != n:
            log.warning(
                "%s has %d partitions; transaction.state.log.num.partitions=%d is ignored",
                TRANSACTION_STATE_TOPIC,
                len(leaders),
                n,
            )
            self.config = replace(self.config, transaction_state_log_num_partitions=len(leaders))
        self.coordinator = TransactionCoordinator(
            self.config, allocate_producer_id=self._take_producer_id, owned_partitions=()
        )
        await self._replay_led_partitions()

    def stop(self) -> None:
        super().stop()
        if self._marker_retry is not None:
            self._marker_retry.cancel()
        self._marker_retry = None

    # ------------------------------------------------------------------ ownership

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    async def ensure_topic(self) -> ErrorCode:
        """Create `__transaction_state` if missing; NONE once it exists."""
        return await self._topic.ensure()

    def _state_topic(self) -> NewTopic:
        cfg = self.broker_config
        return NewTopic(
            TRANSACTION_STATE_TOPIC,
            self.config.transaction_state_log_num_partitions,
            cfg.int("transaction.state.log.replication.factor"),
            configs={
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "min.insync.replicas": str(cfg.int("transaction.state.log.min.isr")),
                "segment.bytes": str(cfg.int("transaction.state.log.segment.bytes")),
                "unclean.leader.election.enable": "false",
            },
        )

    def _load(self, p: int, records: list[tuple[bytes, bytes | None]]) -> None:
        assert self.coordinator is not None
        part = self.replicas.get(TRANSACTION_STATE_TOPIC, p)
        epoch = part.leader_epoch if part is not None else 0
        out = self.coordinator.load_partition(p, records, coordinator_epoch=epoch, now_ms=self.clock())
        self._loaded.add(p)
        self.apply(out)

    def _read_partition(self, p: int) -> list[tuple[bytes, bytes | None]]:
        plog = self._log_of(p)
        return [] if plog is None else list(plain_records(iter_log_entries(plog)))

    # ------------------------------------------------------------------ producer ids

    async def reserve_producer_id(self) -> None:
        """Make sure the allocator has an id to hand out (call before `init_producer_id`)."""
        if self._spare_pid is None:
            pid = self.producer_ids.next_now()
            if pid is None:
                pid = await self.producer_ids.next()
            if self._spare_pid is None:
                self._spare_pid = pid

    def _take_producer_id(self) -> int:
        pid = self._spare_pid
        if pid is None:
            raise RuntimeError("no producer id reserved")
        self._spare_pid = None
        return pid

    # ------------------------------------------------------------------ produce verification

    def verify_produce(self, part: Any, producer_id: int, producer_epoch: int) -> int:
        """The error for a transactional batch of this producer to `part` (0: go ahead)."""
        c = self.coordinator
        if c is None:
            return ErrorCode.INVALID_TXN_STATE
        error = c.verify_produce(producer_id, producer_epoch, (part.topic, part.index))
        unknown = error is ErrorCode.INVALID_TXN_STATE and c.transactional_id_of(producer_id) is None
        if unknown and not self._coordinates_every_id():
            return ErrorCode.NONE  # coordinated by another broker: not verifiable here
        return error

    def _coordinates_every_id(self) -> bool:
        if len(self.metadata.brokers()) <= 1:
            return True
        leaders = self.leaders()
        return leaders is not None and all(
            leader == self.node_id and p in self._loaded for p, leader in leaders.items()
        )

    # ------------------------------------------------------------------ applying outputs

    def apply(self, out: Output, on_error: ResponseOnError | None = None) -> Any:
        """Persist `out.records`, then write `out.markers`; returns the (possibly failed) response."""
        error = self._persist(out.records)
        response = out.response
        if error is not ErrorCode.NONE:
            if on_error is not None and response is not None:
                response = on_error(response, append_error_to_response(error))
        else:
            self._write_markers(out.markers)
        self._reschedule()
        return response

    def _write_markers(self, markers: list[TxnMarkers]) -> None:
        """Write each marker at its partition's leader (here or remote, through the marker writer);
        a partition reports back once its ISR holds the marker, and the last one completes the
        transaction. Markers already under way are not sent twice."""
        for m in markers:
            key = (m.producer_id, m.producer_epoch)
            todo = [(t, p) for t, p in m.partitions if (*key, t, p) not in self._in_flight]
            if not todo:
                continue
            for t, p in todo:
                self._in_flight.add((m.producer_id, m.producer_epoch, t, p))
            self.markers.write(
                m.producer_id,
                m.producer_epoch,
                m.commit,
                m.coordinator_epoch,
                todo,
                functools.partial(self._marker_done, m),
            )

    def _marker_done(self, m: TxnMarkers, topic: str, p: int, code: ErrorCode) -> None:
        self._in_flight.discard((m.producer_id, m.producer_epoch, topic, p))
        if self.coordinator is None or self._stopped:
            return
        if code is ErrorCode.INVALID_PRODUCER_EPOCH:
            log.warning(
                "%s-%d has a newer epoch of producer %d than marker epoch %d; skipped",
                topic,
                p,
                m.producer_id,
                m.producer_epoch,
            )
        elif code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.metadata.image.partition(topic, p) is None:
            pass  # the topic was deleted: nothing to mark
        elif code is not ErrorCode.NONE:
            log.info("marker for %s-%d not written yet: %s", topic, p, code.name)
            self._schedule_marker_retry()
            return
        elif topic == OFFSETS_TOPIC and (part := self.replicas.get(topic, p)) is not None and part.is_leader:
            groups = self.groups.coordinator
            if groups is not None:
                groups.complete_txn(m.producer_id, p, m.commit, now_ms=self.clock())
        done = self.coordinator.markers_written(
            m.transactional_id, m.producer_id, m.producer_epoch, [(topic, p)], now_ms=self.clock()
        )
        self.apply(done)

    def _schedule_marker_retry(self) -> None:
        if self._marker_retry is None and not self._stopped:
            self._marker_retry = asyncio.get_running_loop().call_later(MARKER_RETRY_S, self._retry_markers)

    def _retry_markers(self) -> None:
        self._marker_retry = None
        if self.coordinator is None or self._stopped:
            return
        try:
            self._write_markers(self.coordinator.pending_markers())
        except Exception:
            log.exception("retrying transaction markers failed")
            self._schedule_marker_retry()


# ---------------------------------------------------------------------------- for the handlers


def not_available(shell: TxnShell | None, transactional_id: str) -> ErrorCode:
    """The coordinator error for `transactional_id` (COORDINATOR_NOT_AVAILABLE without a shell)."""
    if shell is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return shell.coordinator_error(transactional_id)


def fenced_error(error: ErrorCode, api_version: int, first_version_with_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) is reported as INVALID_PRODUCER_EPOCH to older request versions."""
    if error is ErrorCode.PRODUCER_FENCED and api_version < first_version_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
