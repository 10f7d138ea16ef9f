"""The transaction coordinator: transactional ids, producer epochs and two-phase commit markers.

Theory of operation
-------------------
A transactional producer is named by its `transactional.id`; the coordinator of that id is the
leader of partition `abs(id.hashCode) % n` of the compacted topic `__transaction_state`, where
every change of the id's metadata is a record (key = id). The metadata moves through Kafka's
states::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
                                          |  \\--EndTxn(abort)----> PrepareAbort  --markers--> CompleteAbort
                                          |                            ^
                                          +--InitProducerId / timeout--+ (PrepareEpochFence: epoch + 1)
    Empty / CompleteCommit / CompleteAbort --InitProducerId--> Empty (epoch + 1)      ... --expiry--> Dead

* InitProducerId gives the id a producer id (from the allocator the shell passes in) and bumps
  its epoch; any older incarnation of the producer is fenced (its requests carry a lower epoch and
  get PRODUCER_FENCED). Near int16 exhaustion the producer id is rotated instead. A producer
  recovering with its current id and epoch (v3+) keeps going; a retry of an answered bump gets the
  same epoch back; anyone else is fenced.
* An InitProducerId that finds a transaction Ongoing fences it: the epoch is bumped, the
  transaction goes PrepareAbort, and the caller gets CONCURRENT_TRANSACTIONS, so it retries after
  the abort completed and then gets a second bump. The transaction timeout does the same when an
  Ongoing transaction is older than its `transaction.timeout.ms` (checked every
  `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
* EndTxn writes PrepareCommit / PrepareAbort, answers, and asks the shell (`Output.markers`) to
  write a control batch to every partition of the transaction; `markers_written` moves it to
  CompleteCommit / CompleteAbort once all are in. Until then EndTxn, AddPartitions and
  InitProducerId answer CONCURRENT_TRANSACTIONS. A retried EndTxn of a completed transaction
  with the same result is answered NONE.
* Ids idle in Empty / Complete* for `transactional.id.expiration.ms` are removed (a tombstone).

Durability follows the group coordinator: every call updates memory and returns the records the
shell must append before it answers or writes markers; if an append fails the shell reloads the
partition (`unload_partition`, `load_partition`). `load_partition` replays a partition's records;
transactions found in a Prepare state get their markers again (a partition may see a marker twice,
which is harmless), Ongoing ones keep running and time out as usual.

Produce requests are checked with `verify_produce`: a transactional batch is accepted only for a
partition of its producer's Ongoing transaction at the current epoch (Kafka 3.6+ verification).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pylog.groups.types import CoordinatorRecord
from pylog.model import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from pylog.protocol.errors import ErrorCode
from pylog.txn.records import (
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_value,
    partition_for,
    transaction_log_key,
)
from pylog.txn.state import COMPLETE, EXPIRABLE, PREPARE, TransactionMetadata, TxnState, is_epoch_exhausted
from pylog.txn.types import (
    OFFSETS_TOPIC,
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    Output,
    TopicPartition,
    TxnConfig,
    TxnMarkers,
)

__all__ = ["TransactionCoordinator"]

E = ErrorCode
ONGOING = TxnState.ONGOING


class TransactionCoordinator:
    """Sans-IO transaction coordinator for the `__transaction_state` partitions it owns.

    `allocate_producer_id` returns a fresh producer id (never handed out before); it is called
    only from `init_producer_id`. `owned_partitions=None` owns every partition (single node).
    """

    def __init__(
        self,
        config: TxnConfig | None = None,
        *,
        allocate_producer_id: Callable[[], int],
        owned_partitions: Iterable[int] | None = None,
    ) -> None:
        self.config = config or TxnConfig()
        self._allocate = allocate_producer_id
        self._txns: dict[str, TransactionMetadata] = {}
        self._by_producer: dict[int, str] = {}
        self._owned: set[int] | None = None if owned_partitions is None else set(owned_partitions)
        self._loading: set[int] = set()
        self._coordinator_epochs: dict[int, int] = {}
        self._next_abort_check_ms: int | None = None
        self._next_expire_check_ms: int | None = None

    # ------------------------------------------------------------------ ownership / inspection

    def partition_for(self, transactional_id: str) -> int:
        """The `__transaction_state` partition holding `transactional_id`."""
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        p = self.partition_for(transactional_id)
        if p in self._loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if self._owned is not None and p not in self._owned:
            return E.NOT_COORDINATOR
        return E.NONE

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """The live metadata, for inspection (describe / tests); do not mutate it."""
        return self._txns.get(transactional_id)

    def transactional_id_of(self, producer_id: int) -> str | None:
        return self._by_producer.get(producer_id)

    def transactional_ids(self) -> list[str]:
        return list(self._txns)

    # ------------------------------------------------------------------ persistence helpers

    def _store(self, md: TransactionMetadata, out: Output) -> None:
        out.records.append(
            CoordinatorRecord(
                self.partition_for(md.transactional_id),
                transaction_log_key(md.transactional_id),
                encode_transaction_log_value(md),
            )
        )

    def _index(self, md: TransactionMetadata) -> None:
        self._by_producer[md.producer_id] = md.transactional_id

    def _unindex(self, producer_id: int, transactional_id: str) -> None:
        if self._by_producer.get(producer_id) == transactional_id:
            del self._by_producer[producer_id]

    # ------------------------------------------------------------------ timers

    def next_deadline_ms(self) -> int | None:
        """When the shell must call `tick` next (None: nothing scheduled yet)."""
        deadlines = [d for d in (self._next_abort_check_ms, self._next_expire_check_ms) if d is not None]
        return min(deadlines, default=None)

    def tick(self, now_ms: int) -> Output:
        """Abort timed-out transactions and expire idle transactional ids when their checks are due."""
        out = Output()
        self._run_timers(now_ms, out)
        return out

    def _start_timers(self, now_ms: int) -> None:
        c = self.config
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = now_ms + c.transaction_abort_timed_out_transaction_cleanup_interval_ms
        if self._next_expire_check_ms is None:
            self._next_expire_check_ms = now_ms + c.transaction_remove_expired_transaction_cleanup_interval_ms

    def _run_timers(self, now_ms: int, out: Output) -> None:
        self._start_timers(now_ms)
        assert self._next_abort_check_ms is not None and self._next_expire_check_ms is not None
        c = self.config
        if now_ms >= self._next_abort_check_ms:
            self.abort_timed_out_transactions(now_ms, out)
            self._next_abort_check_ms = now_ms + c.transaction_abort_timed_out_transaction_cleanup_interval_ms
        if now_ms >= self._next_expire_check_ms:
            self.expire_transactional_ids(now_ms, out)
            self._next_expire_check_ms = now_ms + c.transaction_remove_expired_transaction_cleanup_interval_ms

    def _serving(self, md: TransactionMetadata) -> bool:
        return self.coordinator_error(md.transactional_id) is E.NONE

    def abort_timed_out_transactions(self, now_ms: int, out: Output) -> None:
        """Fence and abort every Ongoing transaction older than its timeout."""
        for md in list(self._txns.values()):
            if md.state is ONGOING and md.start_timestamp_ms + md.timeout_ms < now_ms and self._serving(md):
                self._fence_and_abort(md, now_ms, out)

    def expire_transactional_ids(self, now_ms: int, out: Output) -> None:
        """Remove ids idle (Empty / Complete*) for `transactional.id.expiration.ms`: a tombstone each."""
        horizon = now_ms - self.config.transactional_id_expiration_ms
        for md in list(self._txns.values()):
            if md.state in EXPIRABLE and md.last_update_timestamp_ms <= horizon and self._serving(md):
                md.transition(TxnState.DEAD)
                del self._txns[md.transactional_id]
                self._unindex(md.producer_id, md.transactional_id)
                key = transaction_log_key(md.transactional_id)
                out.records.append(CoordinatorRecord(self.partition_for(md.transactional_id), key, None))

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        now_ms: int,
    ) -> Output:
        """InitProducerId for a transactional id; `Output.response` is an InitProducerIdResult.

        `producer_id` / `producer_epoch` (v3+) name the caller's current incarnation, or -1 / -1.
        """
        out = Output()
        self._run_timers(now_ms, out)
        out.response = self._init_producer_id(
            transactional_id, transaction_timeout_ms, producer_id, producer_epoch, now_ms, out
        )
        return out

    def _init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int, producer_epoch: int, now_ms: int, out: Output
    ) -> InitProducerIdResult:
        if not txn_id:
            return InitProducerIdResult(E.INVALID_REQUEST)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(E.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT)
        if (error := self.coordinator_error(txn_id)) is not E.NONE:
            return InitProducerIdResult(error)
        md = self._txns.get(txn_id)
        if md is None:
            md = TransactionMetadata(
                txn_id, self._allocate(), timeout_ms=timeout_ms, last_update_timestamp_ms=now_ms
            )
            self._txns[txn_id] = md
            self._index(md)
        if expected is not None and not _is_valid_producer_id(md, *expected):
            return InitProducerIdResult(E.PRODUCER_FENCED)
        if md.state in PREPARE:
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if md.state is ONGOING:
            # Abort first; the retry (after CONCURRENT_TRANSACTIONS) bumps the epoch once more.
            self._fence_and_abort(md, now_ms, out)
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        assert md.state in COMPLETE, md.state
        if md.is_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            old_id, old_epoch = md.producer_id, md.producer_epoch
            self._unindex(old_id, txn_id)
            md.last_producer_id = old_id
            md.last_producer_epoch = old_epoch if expected is not None else NO_PRODUCER_EPOCH
            md.producer_id, md.producer_epoch = self._allocate(), 0
            self._index(md)
        else:
            bumped = _bump_epoch(md, None if expected is None else expected[1])
            if bumped is None:
                return InitProducerIdResult(E.PRODUCER_FENCED)
            md.producer_epoch, md.last_producer_epoch = bumped
        md.transition(TxnState.EMPTY)
        md.timeout_ms = timeout_ms
        md.partitions = set()
        md.start_timestamp_ms = -1
        md.last_update_timestamp_ms = now_ms
        self._store(md, out)
        return InitProducerIdResult(E.NONE, md.producer_id, md.producer_epoch)

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def add_partitions_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
    ) -> Output:
        """AddPartitionsToTxn (v0-3 form); `Output.response` is one ErrorCode for all partitions."""
        out = Output()
        self._run_timers(now_ms, out)
        out.response = self._add_partitions(
            transactional_id, producer_id, producer_epoch, set(partitions), now_ms, out
        )
        return out

    def add_offsets_to_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets_partition: int,
        *,
        now_ms: int,
    ) -> Output:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so
        the commit marker also lands there and materialises the TxnOffsetCommit records."""
        return self.add_partitions_to_txn(
            transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, offsets_partition)], now_ms=now_ms
        )

    def _add_partitions(
        self, txn_id: str, producer_id: int, epoch: int, parts: set[TopicPartition], now_ms: int, out: Output
    ) -> ErrorCode:
        if not txn_id:
            return E.INVALID_REQUEST
        if (error := self.coordinator_error(txn_id)) is not E.NONE:
            return error
        md = self._txns.get(txn_id)
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        if md.state in PREPARE:
            return E.CONCURRENT_TRANSACTIONS
        if md.state is ONGOING and parts <= md.partitions:
            return E.NONE
        if md.state in COMPLETE:
            md.start_timestamp_ms = now_ms
        md.transition(ONGOING)
        md.partitions |= parts
        md.last_update_timestamp_ms = now_ms
        self._store(md, out)
        return E.NONE

    # ------------------------------------------------------------------ EndTxn and markers

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *, now_ms: int
    ) -> Output:
        """EndTxn; `Output.response` is the ErrorCode, `Output.markers` what to write next."""
        out = Output()
        self._run_timers(now_ms, out)
        out.response = self._end_txn(transactional_id, producer_id, producer_epoch, commit, now_ms, out)
        return out

    def _end_txn(
        self, txn_id: str, producer_id: int, epoch: int, commit: bool, now_ms: int, out: Output
    ) -> ErrorCode:
        if not txn_id:
            return E.INVALID_REQUEST
        if (error := self.coordinator_error(txn_id)) is not E.NONE:
            return error
        md = self._txns.get(txn_id)
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if epoch != md.producer_epoch:
            return E.PRODUCER_FENCED
        state = md.state
        if state is ONGOING:
            self._prepare(md, commit, now_ms, out)
            return E.NONE
        done, preparing = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        if state is done:
            return E.NONE  # a retry of an EndTxn that was answered
        if state is preparing:
            return E.CONCURRENT_TRANSACTIONS
        return E.INVALID_TXN_STATE

    def _fence_and_abort(self, md: TransactionMetadata, now_ms: int, out: Output) -> None:
        md.transition(TxnState.PREPARE_EPOCH_FENCE)
        md.producer_epoch += 1
        md.last_producer_epoch = NO_PRODUCER_EPOCH
        self._prepare(md, False, now_ms, out)

    def _prepare(self, md: TransactionMetadata, commit: bool, now_ms: int, out: Output) -> None:
        md.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
        md.last_update_timestamp_ms = now_ms
        md.pending_markers = set(md.partitions)
        self._store(md, out)
        self._request_markers(md, out)
        if not md.pending_markers:
            self._complete(md, now_ms, out)

    def _request_markers(self, md: TransactionMetadata, out: Output) -> None:
        if md.pending_markers:
            out.markers.append(
                TxnMarkers(
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                    md.state is TxnState.PREPARE_COMMIT,
                    self._coordinator_epochs.get(self.partition_for(md.transactional_id), 0),
                    tuple(sorted(md.pending_markers)),
                )
            )

    def _complete(self, md: TransactionMetadata, now_ms: int, out: Output) -> None:
        md.transition(
            TxnState.COMPLETE_COMMIT if md.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        )
        md.partitions = set()
        md.pending_markers = set()
        md.last_update_timestamp_ms = now_ms
        self._store(md, out)

    def markers_written(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        *,
        now_ms: int,
    ) -> Output:
        """The shell wrote the markers of `partitions`; the last one completes the transaction.

        Reports about a transaction that moved on meanwhile (reloaded, fenced) are ignored.
        """
        out = Output()
        md = self._txns.get(transactional_id)
        if (
            md is None
            or md.producer_id != producer_id
            or md.producer_epoch != producer_epoch
            or md.state not in PREPARE
        ):
            return out
        md.pending_markers.difference_update(partitions)
        if not md.pending_markers:
            self._complete(md, now_ms, out)
        return out

    def pending_markers(self) -> list[TxnMarkers]:
        """Markers of every transaction still in a Prepare state (the shell's retry after failures)."""
        out = Output()
        for md in self._txns.values():
            if md.state in PREPARE:
                self._request_markers(md, out)
        return out.markers

    # ------------------------------------------------------------------ produce verification

    def verify_produce(self, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode:
        """May a transactional batch of `producer_id` / `producer_epoch` be appended to `tp`?

        Only producers of the partitions loaded here are known; the shell decides what a producer
        coordinated elsewhere gets (`transactional_id_of` is None for it).
        """
        txn_id = self._by_producer.get(producer_id)
        md = self._txns.get(txn_id) if txn_id is not None else None
        if md is None:
            return E.INVALID_TXN_STATE
        if producer_epoch != md.producer_epoch:
            return E.INVALID_PRODUCER_EPOCH
        if md.state is not ONGOING or tp not in md.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    # ------------------------------------------------------------------ Describe / ListTransactions

    def describe_transactions(self, transactional_ids: Iterable[str]) -> list[DescribedTransaction]:
        result = []
        for txn_id in transactional_ids:
            if not txn_id:
                result.append(DescribedTransaction(E.INVALID_REQUEST, txn_id))
                continue
            if (error := self.coordinator_error(txn_id)) is not E.NONE:
                result.append(DescribedTransaction(error, txn_id))
                continue
            md = self._txns.get(txn_id)
            if md is None:
                result.append(DescribedTransaction(E.TRANSACTIONAL_ID_NOT_FOUND, txn_id))
                continue
            topics: dict[str, list[int]] = {}
            for topic, p in sorted(md.partitions):
                topics.setdefault(topic, []).append(p)
            result.append(
                DescribedTransaction(
                    E.NONE,
                    txn_id,
                    md.state.kafka_name,
                    md.timeout_ms,
                    md.start_timestamp_ms,
                    md.producer_id,
                    md.producer_epoch,
                    tuple((t, tuple(ps)) for t, ps in topics.items()),
                )
            )
        return result

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        *,
        now_ms: int,
    ) -> tuple[ErrorCode, list[ListedTransaction]]:
        """ListTransactions; empty filters match everything, unknown state names match nothing."""
        names = list(state_filters)
        states = {s for s in (TxnState.from_kafka_name(n) for n in names) if s is not None}
        if names and not states:
            return E.NONE, []
        pids = set(producer_id_filters)
        listed = [
            ListedTransaction(md.transactional_id, md.producer_id, md.state.kafka_name)
            for md in self._txns.values()
            if (not states or md.state in states)
            and (not pids or md.producer_id in pids)
            and (duration_filter_ms < 0 or now_ms - md.start_timestamp_ms >= duration_filter_ms)
        ]
        error = E.COORDINATOR_LOAD_IN_PROGRESS if self._loading else E.NONE
        return error, listed

    # ------------------------------------------------------------------ loading

    def mark_loading(self, partition: int) -> None:
        """Answer COORDINATOR_LOAD_IN_PROGRESS for `partition` until `load_partition`."""
        self._loading.add(partition)

    def load_partition(
        self,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None]],
        *,
        coordinator_epoch: int = 0,
        now_ms: int,
    ) -> Output:
        """Become coordinator of `partition`, rebuilding its transactions from its (key, value)
        records. `Output.markers` re-drive transactions that were preparing when the log ended."""
        self._drop_partition(partition)
        latest: dict[str, bytes | None] = {}
        for key, value in records:
            txn_id = decode_transaction_log_key(bytes(key))
            if txn_id is not None:
                latest[txn_id] = None if value is None else bytes(value)
        out = Output()
        self._coordinator_epochs[partition] = coordinator_epoch
        for txn_id, value in latest.items():
            if value is None:
                continue
            v = decode_transaction_log_value(value)
            if v.state is TxnState.DEAD:
                continue
            state = ONGOING if v.state is TxnState.PREPARE_EPOCH_FENCE else v.state
            md = TransactionMetadata(
                txn_id,
                v.producer_id,
                v.producer_epoch,
                v.timeout_ms,
                state,
                set(v.partitions),
                v.start_timestamp_ms,
                v.last_update_timestamp_ms,
            )
            self._txns[txn_id] = md
            self._index(md)
            if state in PREPARE:
                md.pending_markers = set(md.partitions)
                self._request_markers(md, out)
                if not md.pending_markers:
                    self._complete(md, now_ms, out)
        self._loading.discard(partition)
        if self._owned is not None:
            self._owned.add(partition)
        self._start_timers(now_ms)
        return out

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition` (leadership lost / append failure)."""
        self._drop_partition(partition)
        if self._owned is None:
            self._owned = set(range(self.config.transaction_state_log_num_partitions))
        self._owned.discard(partition)

    def _drop_partition(self, partition: int) -> None:
        for txn_id in [t for t in self._txns if self.partition_for(t) == partition]:
            md = self._txns.pop(txn_id)
            self._unindex(md.producer_id, txn_id)


def _is_valid_producer_id(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """Kafka's check of the (producer id, epoch) an InitProducerId v3+ brings: a just-created id,
    the current producer id, or the previous one whose epoch ran out (a retried rotation)."""
    return (
        md.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == md.producer_id
        or (producer_id == md.last_producer_id and is_epoch_exhausted(epoch))
    )


def _bump_epoch(md: TransactionMetadata, expected_epoch: int | None) -> tuple[int, int] | None:
    """(new epoch, last epoch) for an InitProducerId, or None when the caller is fenced."""
    bumped = md.producer_epoch + 1
    if expected_epoch is None:
        return bumped, NO_PRODUCER_EPOCH
    if md.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == md.producer_epoch:
        return bumped, md.producer_epoch
    if expected_epoch == md.last_producer_epoch:
        return md.producer_epoch, md.last_producer_epoch  # a retry of an answered bump
    return None
