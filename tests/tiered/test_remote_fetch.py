"""The broker's read path below the local log start: a consumer's Fetch from offset 0 reads the
store (off the event loop) and then the local log, every offset once and in order; ListOffsets'
remote answers come from the same view. Real partition logs and a real store; no sockets."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.protocol.errors import ErrorCode
from pylog.storage.remote_layout import ManifestMetadata
from pylog.storage.remote_store import RemoteStore, open_remote_store

from pylog.broker.datapath.replica_manager import (
    CONSUMER,
    FetchIsolation,
    FetchParams,
    FetchPosition,
    ReplicaManager,
)
from pylog.broker.tiered.remote_reads import RemoteReads
from pylog.config import BrokerConfig

sys.path.insert(0, str(Path(__file__).parents[1] / "broker"))
from records_util import make_batch, offsets_of

from tests.tiered.tiered_helpers import upload

TID = uuid.UUID(int=0xFE7C4)
TS = 1_700_000_000_000
BATCHES, PER_BATCH = 80, 25


@pytest.fixture
def store(tmp_path: Path) -> RemoteStore:
    return open_remote_store(f"file://{tmp_path}/tier")


@pytest.fixture
def replicas(tmp_path: Path, store: RemoteStore) -> Iterator[ReplicaManager]:
    manager = ReplicaManager(BrokerConfig({}), tmp_path / "data", lambda: TS)
    manager.remote_reads = RemoteReads(store, lambda: ManifestMetadata(store), cache_bytes=64 << 20)
    yield manager
    manager.remote_reads.close()
    manager.close()


def _tiered_partition(replicas: ReplicaManager, store: RemoteStore) -> tuple[object, int]:
    part = replicas.ensure_partition("t", 0, TID, {"segment.bytes": str(16 << 10),
                                                   "remote.storage.enable": "true"})
    part.become_leader(1, 0, 0, (1,), (1,), now_ms=0)
    for b in range(BATCHES):
        values = [(b"v%d" % (b * PER_BATCH + i)).ljust(40, b"-") for i in range(PER_BATCH)]
        res = replicas.append_records([("t", 0, make_batch(values, timestamp=TS + b * 1000))], acks=1,
                                      timeout_ms=0)
        assert res.results[0].error == 0
    part.seal_rolled_segments()
    manifest = upload(part.log.dir, store, "t", TID, 0, count=5)
    part.delete_local_segments(manifest.end_offset)  # the local copies are gone
    part.wire.clear()  # as after a restart: no produced batch bytes kept in memory
    assert (part.log_start_offset, part.local_log_start_offset) == (0, manifest.end_offset)
    return part, manifest.end_offset


def _fetch(replicas: ReplicaManager, offset: int, *, max_bytes: int = 8 << 10,
           isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> list:  # type: ignore[type-arg]
    params = FetchParams(CONSUMER, 100, 1, max_bytes, isolation)
    out = replicas.fetch_messages(params, [("t", FetchPosition(0, offset, max_bytes))],
                                  expand_isr=lambda _p, _r: None, stopping=lambda: False)
    if not isinstance(out, list):
        out = asyncio.run(_wait(out))
    return out


async def _wait(aw):  # type: ignore[no-untyped-def]
    return await aw


def test_consumer_reads_from_offset_zero_across_the_tiers(replicas: ReplicaManager,
                                                          store: RemoteStore) -> None:
    _part, local_start = _tiered_partition(replicas, store)
    total = BATCHES * PER_BATCH
    seen: list[int] = []
    offset = 0
    remote_answers = 0
    while offset < total:
        params_out = _fetch(replicas, offset)
        (d,) = params_out
        assert d.error == 0 and d.log_start_offset == 0 and d.high_watermark == total
        got = offsets_of(b"".join(d.records))
        assert got, f"no records at {offset}"
        remote_answers += offset < local_start
        seen.extend(o for o in got if o >= offset)
        offset = got[-1] + 1
    assert seen == list(range(total))
    assert remote_answers >= 2
    assert replicas.remote_reads.cache.stats.prefetches > 0  # type: ignore[union-attr]
    for isolation in (FetchIsolation.TXN_COMMITTED,):
        (d,) = _fetch(replicas, 7, isolation=isolation)
        assert offsets_of(b"".join(d.records))[0] <= 7 and d.aborted_transactions == []


def test_offsets_below_the_log_start_are_out_of_range(replicas: ReplicaManager, store: RemoteStore) -> None:
    part, local_start = _tiered_partition(replicas, store)
    reads = replicas.remote_reads
    assert reads is not None
    assert reads.latest_tiered_offset(part) == local_start - 1
    store.delete([o.key for o in store.list("t-" + TID.hex + "/0/manifest")])  # nothing remote any more
    (d,) = _fetch(replicas, 0)
    assert d.error == ErrorCode.OFFSET_OUT_OF_RANGE and not d.records
    (d,) = _fetch(replicas, local_start)
    assert d.error == 0 and offsets_of(b"".join(d.records))[0] == local_start


def test_list_offsets_by_time_in_the_store(replicas: ReplicaManager, store: RemoteStore) -> None:
    part, _local_start = _tiered_partition(replicas, store)
    reads = replicas.remote_reads
    assert reads is not None
    assert reads.may_hold_timestamp(part, TS + 3000)
    found = asyncio.run(reads.offset_for_timestamp(part, TS + 3000, part.high_watermark))
    assert found == (3 * PER_BATCH, TS + 3000)
    late = TS + (BATCHES - 1) * 1000
    assert not reads.may_hold_timestamp(part, late)  # only the local log has it
    assert asyncio.run(reads.max_timestamp_and_offset(part))[0] < late


def test_aborted_transactions_of_a_remote_read(tmp_path: Path, store: RemoteStore) -> None:
    """read_committed from the store: the aborted transactions overlapping the records read come from
    the stored batch metadata and markers, including a marker that is only on local disk."""
    from types import SimpleNamespace

    from pylog.storage import PartitionLog
    from pylog.storage.remote_cache import RemoteReadCache
    from pylog.storage.remote_segment import RemoteLog

    from pylog.broker.tiered.remote_reads import RemoteFetch, merge_aborted, remote_aborted

    sys.path.insert(0, str(Path(__file__).parents[1] / "sdk"))
    from sdk_helpers import LogWriter

    w = LogWriter(tmp_path / "d", "t")
    w.append(5)
    a0, _ = w.append(5, producer_id=7, transactional=True)
    a_end = w.marker(7, commit=False)
    w.append(5, producer_id=8, transactional=True)
    w.marker(8, commit=True)
    w.log.roll()
    c0, _ = w.append(5, producer_id=9, transactional=True)
    w.log.roll()
    c_end = w.marker(9, commit=False)  # the ABORT of pid 9 is only on local disk
    w.append(5)
    w.log.seal_pending()
    manifest = upload(w.log.dir, store, "t", TID, 0, count=2)
    w.close()
    local = PartitionLog.open_readonly(tmp_path / "d" / "t-0")
    part = SimpleNamespace(log=local, log_end_offset=local.log_end_offset,
                           local_log_start_offset=manifest.end_offset)
    with RemoteReadCache(8 << 20) as cache:
        remote = RemoteLog.from_manifest(store, manifest, cache)
        fetch = RemoteFetch(part, remote, 0, 1 << 20, remote.log_end_offset, True, True)
        found = remote_aborted(fetch, remote.log_end_offset)
        got = [(a.producer_id, a.first_offset, a.last_offset) for a in found]
        assert got == [(7, a0, a_end), (9, c0, c_end)]
        assert remote_aborted(fetch, a0) == []  # nothing read overlaps them
        known = [found[0]]
        assert merge_aborted(known, found) == found  # each transaction once
    local.close()
