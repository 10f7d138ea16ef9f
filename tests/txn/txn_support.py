"""Drive a TransactionCoordinator the way the broker shell does, with explicit time."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from pylog.txn import Output, TransactionCoordinator, TxnConfig, TxnMarkers
from pylog.txn.records import decode_transaction_log_key

TXN = "txn-1"
MINUTE = 60_000


@dataclass
class Shell:
    """Keeps the `__transaction_state` log and the markers asked for, like the asyncio shell."""

    config: TxnConfig = field(default_factory=TxnConfig)
    now: int = 1_000_000
    log: list[tuple[int, bytes, bytes | None]] = field(default_factory=list)
    markers: list[TxnMarkers] = field(default_factory=list)
    auto_markers: bool = True
    ids: itertools.count = field(default_factory=lambda: itertools.count(1000))

    def __post_init__(self) -> None:
        self.c = self.new_coordinator()

    def new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, allocate_producer_id=lambda: next(self.ids))

    def absorb(self, out: Output) -> Output:
        for r in out.records:
            txn_id = decode_transaction_log_key(r.key)
            assert txn_id is not None and r.partition == self.c.partition_for(txn_id)
            self.log.append((r.partition, r.key, r.value))
        self.markers.extend(out.markers)
        if self.auto_markers:
            self.write_markers()
        return out

    def write_markers(self) -> None:
        pending, self.markers = self.markers, []
        for m in pending:
            self.absorb(
                self.c.markers_written(
                    m.transactional_id, m.producer_id, m.producer_epoch, m.partitions, now_ms=self.now
                )
            )

    def advance(self, ms: int) -> Output:
        self.now += ms
        return self.absorb(self.c.tick(self.now))

    def restart(self) -> Output:
        """A new coordinator replaying the log, partition by partition."""
        self.c = self.new_coordinator()
        out = Output()
        for p in sorted({p for p, _, _ in self.log}):
            recs = [(k, v) for q, k, v in self.log if q == p]
            out.extend(self.c.load_partition(p, recs, coordinator_epoch=1, now_ms=self.now))
        return self.absorb(out)

    # ------------------------------------------------------------------ API shorthands

    def init(self, txn: str = TXN, timeout: int = MINUTE, pid: int = -1, epoch: int = -1):
        out = self.absorb(
            self.c.init_producer_id(txn, timeout, producer_id=pid, producer_epoch=epoch, now_ms=self.now)
        )
        return out.response

    def add(self, pid: int, epoch: int, *parts: tuple[str, int], txn: str = TXN):
        return self.absorb(self.c.add_partitions_to_txn(txn, pid, epoch, parts, now_ms=self.now)).response

    def add_offsets(self, pid: int, epoch: int, offsets_partition: int, txn: str = TXN):
        out = self.c.add_offsets_to_txn(txn, pid, epoch, offsets_partition, now_ms=self.now)
        return self.absorb(out).response

    def end(self, pid: int, epoch: int, commit: bool, txn: str = TXN):
        return self.absorb(self.c.end_txn(txn, pid, epoch, commit, now_ms=self.now)).response

    def state(self, txn: str = TXN):
        md = self.c.transaction(txn)
        assert md is not None
        return md.state
