"""Committed offsets of every group, whatever its type (OffsetCommit, TxnOffsetCommit, OffsetFetch,
OffsetDelete, retention).

Theory of operation
-------------------
Offsets are kept by group id, apart from the groups, as Kafka's OffsetMetadataManager keeps
them: a group may change type (classic <-> consumer) without touching its offsets. The group
state machines decide whether a commit is allowed (member, generation or epoch); this store only
records it and returns the `__consumer_offsets` records that make it durable:

* an OffsetCommit value per committed partition, a tombstone per expired / deleted offset;
* TxnOffsetCommit values in a transactional batch of the producer (`CoordinatorRecord.producer_id`),
  kept *pending* per producer until the transaction's COMMIT marker lands in the group's
  partition (`complete_txn`: they become committed) or ABORT (dropped). OffsetFetch with
  `require_stable` answers UNSTABLE_OFFSET_COMMIT for a partition with a pending commit.

Whichever record was appended later wins, as in Kafka: every offset remembers the log offset of
its record (`records_appended` live, the replayed entries' offsets on load), a COMMIT marker
materialises a pending offset only over an older committed one, and an offset tombstone also
drops pending offsets of that partition.

Retention (`expire`, every `offsets.retention.check.interval.ms`): the owner of the group says
from when its offsets age (`ExpiryBasis`): a group with members keeps them (except for topics a
Stable classic consumer group no longer subscribes to), an Empty group's age from when it became
Empty, a group without a protocol (standalone commits) from each commit. Time is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from pylog.groups.records import (
    OffsetAndMetadata,
    OffsetKey,
    decode_key,
    decode_offset_value,
    encode_offset_value,
    offset_commit_key,
)
from pylog.groups.types import (
    CoordinatorRecord,
    FetchedOffset,
    GroupConfig,
    OffsetCommitPartition,
    OffsetFetchResult,
    Output,
    PartitionError,
    TopicPartition,
)
from pylog.protocol.errors import ErrorCode

Offsets = dict[TopicPartition, OffsetAndMetadata]
Pending = dict[int, dict[str, Offsets]]  # producer id -> group id -> offsets of its open transaction


@dataclass(frozen=True)
class ExpiryBasis:
    """From when a group's offsets age: `since_ms` (None: each offset's commit time); offsets of
    `subscribed` topics never expire."""

    since_ms: int | None = None
    subscribed: frozenset[str] = frozenset()


class OffsetStore:
    """Offsets of the groups of the owned `__consumer_offsets` partitions."""

    def __init__(self, config: GroupConfig, partition_for: Callable[[str], int]) -> None:
        self.config = config
        self.partition_for = partition_for
        self._offsets: dict[str, Offsets] = {}
        self._pending: Pending = {}

    # ------------------------------------------------------------------ queries

    def of(self, group_id: str) -> Offsets:
        """The committed offsets of `group_id` (empty if none); do not mutate."""
        return self._offsets.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def has_pending(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        """Whether an open transaction holds offsets of `group_id` (of `tp`, if given)."""
        for by_group in self._pending.values():
            offsets = by_group.get(group_id)
            if offsets is not None and (tp is None or tp in offsets):
                return True
        return False

    def group_ids(self) -> set[str]:
        ids = {g for g, o in self._offsets.items() if o}
        ids.update(g for by_group in self._pending.values() for g in by_group)
        return ids

    # ------------------------------------------------------------------ commits

    def commit(
        self,
        group_id: str,
        partitions: Iterable[OffsetCommitPartition],
        *,
        retention_time_ms: int = -1,
        now_ms: int,
        out: Output,
    ) -> list[PartitionError]:
        """Record an accepted OffsetCommit; `retention_time_ms` (v2-4) sets a per-offset expiry."""
        p = self.partition_for(group_id)
        results = []
        offsets = self._offsets.setdefault(group_id, {})
        for c in partitions:
            metadata = c.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                results.append(PartitionError(c.topic, c.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            commit_ts = c.commit_timestamp if c.commit_timestamp >= 0 else now_ms
            expire_ts = now_ms + retention_time_ms if retention_time_ms >= 0 else None
            value = OffsetAndMetadata(c.offset, c.leader_epoch, metadata, commit_ts, expire_ts)
            offsets[(c.topic, c.partition)] = value
            key = offset_commit_key(group_id, c.topic, c.partition)
            out.records.append(CoordinatorRecord(p, key, encode_offset_value(value)))
            results.append(PartitionError(c.topic, c.partition, ErrorCode.NONE))
        return results

    def txn_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[OffsetCommitPartition],
        *,
        now_ms: int,
        out: Output,
    ) -> list[PartitionError]:
        """Record an accepted TxnOffsetCommit as pending offsets of the producer's transaction."""
        p = self.partition_for(group_id)
        pending = self._pending.setdefault(producer_id, {}).setdefault(group_id, {})
        results = []
        for c in partitions:
            metadata = c.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                results.append(PartitionError(c.topic, c.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            value = OffsetAndMetadata(c.offset, c.leader_epoch, metadata, now_ms)
            pending[(c.topic, c.partition)] = value
            key = offset_commit_key(group_id, c.topic, c.partition)
            out.records.append(
                CoordinatorRecord(p, key, encode_offset_value(value), producer_id, producer_epoch)
            )
            results.append(PartitionError(c.topic, c.partition, ErrorCode.NONE))
        return results

    def complete_txn(self, producer_id: int, partition: int, commit: bool) -> None:
        """A COMMIT / ABORT marker of `producer_id` was written to `partition`."""
        by_group = self._pending.get(producer_id)
        if not by_group:
            return
        for gid in [g for g in by_group if self.partition_for(g) == partition]:
            offsets = by_group.pop(gid)
            if commit:
                _materialise(self._offsets.setdefault(gid, {}), offsets)
        if not by_group:
            del self._pending[producer_id]

    def records_appended(self, records: Sequence[CoordinatorRecord], first_offset: int) -> None:
        """`records` landed at consecutive log offsets from `first_offset`: remember where."""
        for at, r in enumerate(records, first_offset):
            if r.value is None:
                continue
            k = decode_key(r.key)
            if not isinstance(k, OffsetKey):
                continue
            if r.producer_id >= 0:
                offsets = self._pending.get(r.producer_id, {}).get(k.group_id)
            else:
                offsets = self._offsets.get(k.group_id)
            tp = (k.topic, k.partition)
            if offsets is not None and tp in offsets:
                offsets[tp] = replace(offsets[tp], record_offset=at)

    # ------------------------------------------------------------------ fetch / delete / expire

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None, *, require_stable: bool
    ) -> OffsetFetchResult:
        """OffsetFetch for one group; `partitions=None` fetches all. Unknown: offset -1, no error."""
        offsets = self._offsets.get(group_id, {})
        wanted = list(offsets) if partitions is None else list(partitions)
        result = []
        for tp in wanted:
            o = offsets.get(tp)
            if require_stable and self._pending and self.has_pending(group_id, tp):
                result.append(FetchedOffset(tp[0], tp[1], -1, error=ErrorCode.UNSTABLE_OFFSET_COMMIT))
            elif o is None:
                result.append(FetchedOffset(tp[0], tp[1], -1))
            else:
                result.append(FetchedOffset(tp[0], tp[1], o.offset, o.leader_epoch, o.metadata))
        return OffsetFetchResult(group_id, ErrorCode.NONE, tuple(result))

    def delete(self, group_id: str, tp: TopicPartition, out: Output) -> None:
        """Drop one committed offset (and pending ones of that partition) with a tombstone."""
        offsets = self._offsets.get(group_id)
        if offsets is not None and offsets.pop(tp, None) is not None:
            self._tombstone(group_id, tp, out)

    def delete_group(self, group_id: str, out: Output) -> None:
        for tp in list(self._offsets.get(group_id, {})):
            self._tombstone(group_id, tp, out)
        self._offsets.pop(group_id, None)

    def expire(self, basis: Callable[[str], ExpiryBasis | None], now_ms: int, out: Output) -> None:
        """Drop the offsets whose retention ran out; `basis(group_id)` None keeps a group's."""
        retention = self.config.offsets_retention_ms
        for gid, offsets in list(self._offsets.items()):
            b = basis(gid)
            if b is None:
                continue
            for tp, o in list(offsets.items()):
                if tp[0] in b.subscribed or self.has_pending(gid, tp):
                    continue
                if o.expire_timestamp is not None:
                    expired = now_ms >= o.expire_timestamp
                else:
                    expired = (
                        now_ms - (b.since_ms if b.since_ms is not None else o.commit_timestamp) >= retention
                    )
                if expired:
                    del offsets[tp]
                    self._tombstone(gid, tp, out)
            if not offsets:
                del self._offsets[gid]

    def _tombstone(self, group_id: str, tp: TopicPartition, out: Output) -> None:
        out.records.append(
            CoordinatorRecord(self.partition_for(group_id), offset_commit_key(group_id, *tp), None)
        )
        _drop_pending(self._pending, group_id, tp)

    # ------------------------------------------------------------------ loading

    def drop_partition(self, partition: int) -> None:
        for gid in [g for g in self._offsets if self.partition_for(g) == partition]:
            del self._offsets[gid]
        for pid in list(self._pending):
            by_group = self._pending[pid]
            for gid in [g for g in by_group if self.partition_for(g) == partition]:
                del by_group[gid]
            if not by_group:
                del self._pending[pid]

    def replay_commit(self, group_id: str, tp: TopicPartition, value: bytes | None, at: int) -> None:
        if value is None:
            self._offsets.get(group_id, {}).pop(tp, None)
            _drop_pending(self._pending, group_id, tp)
        else:
            stored = replace(decode_offset_value(bytes(value)), record_offset=at)
            self._offsets.setdefault(group_id, {})[tp] = stored

    def replay_txn_commit(
        self, producer_id: int, group_id: str, tp: TopicPartition, value: bytes, at: int
    ) -> None:
        by_group = self._pending.setdefault(producer_id, {}).setdefault(group_id, {})
        by_group[tp] = replace(decode_offset_value(bytes(value)), record_offset=at)

    def replay_marker(self, producer_id: int, commit: bool, partition: int) -> None:
        self.complete_txn(producer_id, partition, commit)


def _materialise(committed: Offsets, txn_offsets: Offsets) -> None:
    """A COMMIT marker: each transactional offset replaces the committed one unless that was
    appended later (Kafka compares record offsets; unknown ones let the transactional offset win)."""
    for tp, o in txn_offsets.items():
        current = committed.get(tp)
        if (
            current is None
            or min(o.record_offset, current.record_offset) < 0
            or (o.record_offset > current.record_offset)
        ):
            committed[tp] = o


def _drop_pending(pending: Pending, group_id: str, tp: TopicPartition) -> None:
    """An offset tombstone of `group_id` / `tp` also removes that partition's pending offsets."""
    for by_group in pending.values():
        offsets = by_group.get(group_id)
        if offsets is not None:
            offsets.pop(tp, None)
