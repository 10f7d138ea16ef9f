"""Remote fetches serve a segment's uploaded `.wire` object as slices, byte for byte what a local
read of the same segment sends; a segment uploaded without one, or with one that does not match its
`.batches`, is served by encoding its rows, with the same bytes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pylog.storage.remote_cache import RemoteReadCache
from pylog.storage.remote_layout import segment_key
from pylog.storage.remote_segment import RemoteLog, WireStats
from pylog.storage.remote_store import open_remote_store
from pylog.storage.schema import StoredBatch

from pylog.broker.datapath.batch_bytes import encode_stored
from tests.tiered.tiered_helpers import upload, write_partition

TOPIC = "events"
TID = uuid.UUID(int=0xC0FFEE)


def _bytes(items: list[StoredBatch | memoryview]) -> list[bytes]:
    return [bytes(b) if isinstance(b, memoryview) else encode_stored(b.meta, b.records) for b in items]


def _read_all(log, start: int, end: int, max_bytes: int) -> tuple[list[bytes], int]:  # type: ignore[no-untyped-def]
    out: list[bytes] = []
    sliced = 0
    off = start
    while off < end:
        got = log.read_wire(off, max_bytes, max_offset=end)
        sliced += sum(isinstance(b, memoryview) for b in got)
        out.extend(_bytes(got))
        last = got[-1]
        off = (int.from_bytes(bytes(last[:8]), "big") + int.from_bytes(bytes(last[23:27]), "big") + 1
               if isinstance(last, memoryview) else last.meta.base_offset + last.meta.last_offset_delta + 1)
    return out, sliced


@pytest.mark.parametrize("max_bytes", [1, 5000, 1 << 20])
def test_remote_wire_slices_equal_local_wire(tmp_path: Path, max_bytes: int) -> None:
    local = write_partition(tmp_path / "p", batches=90, per_batch=30, segment_bytes=24 << 10,
                            wire=encode_stored)
    assert list(local.dir.glob("*.wire")), "sealed segments have .wire files"
    store = open_remote_store(f"file://{tmp_path}/tier")
    manifest = upload(local.dir, store, TOPIC, TID, 0)
    with RemoteReadCache(128 << 10, chunk_bytes=8 << 10, readahead=2) as cache:
        remote = RemoteLog.from_manifest(store, manifest, cache)
        end = remote.log_end_offset
        before = WireStats.served
        got, sliced = _read_all(remote, 0, end, max_bytes)
        want, _ = _read_all(local, 0, end, max_bytes)
        assert got == want and sliced == len(got) and WireStats.served - before == len(got)
    local.close()


def test_remote_without_or_with_bad_wire_encodes_rows(tmp_path: Path) -> None:
    local = write_partition(tmp_path / "p", batches=60, per_batch=30, segment_bytes=24 << 10,
                            wire=encode_stored)
    store = open_remote_store(f"file://{tmp_path}/tier")
    manifest = upload(local.dir, store, TOPIC, TID, 0)
    segs = manifest.segments
    assert len(segs) >= 3
    store.delete([segment_key(manifest.prefix, segs[0], ".wire")])  # uploaded before `.wire` existed
    wire1 = segment_key(manifest.prefix, segs[1], ".wire")
    raw = bytearray(store.read_bytes(wire1))
    raw[0:8] = (10**9).to_bytes(8, "big")  # first batch's base offset wrong, size unchanged
    store.put_bytes(wire1, bytes(raw))
    with RemoteReadCache(128 << 10, chunk_bytes=8 << 10) as cache:
        remote = RemoteLog.from_manifest(store, manifest, cache)
        end = remote.log_end_offset
        rejected = WireStats.rejected
        got, sliced = _read_all(remote, 0, end, 1 << 20)
        want, _ = _read_all(local, 0, end, 1 << 20)
        assert got == want
        n0 = len(remote.segments[0].batches)
        n1 = len(remote.segments[1].batches)
        assert 0 < sliced == len(got) - n0 - n1 and WireStats.rejected == rejected + 1
    local.close()
