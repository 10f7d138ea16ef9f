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

from pylog.broker.remote_reads import RemoteReads
from pylog.broker.replica_manager import CONSUMER, FetchIsolation, FetchParams, FetchPosition, ReplicaManager
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
