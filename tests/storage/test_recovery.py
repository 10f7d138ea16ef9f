"""Crash safety: torn appends at every byte, lost or damaged side files, interrupted swaps, kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pylog.storage import LogConfig, PartitionLog, Stats
from pylog.storage import onecopy as oc
from pylog.storage.rewrite import Written, coalesce, write_rows_segment, write_segment
from pylog.storage.segment import Segment
from storage_helpers import meta_for, open_log, records

SIDE = (".index", ".timeindex", ".batches")
ACTIVE = "00000000000000000000"


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _restore(directory: Path, files: dict[str, bytes]) -> None:
    for p in directory.iterdir():
        p.unlink()
    for name, data in files.items():
        (directory / name).write_bytes(data)


def _build(directory: Path, batches: int, config: LogConfig | None = None, fmt: int = 1,
           ) -> list[tuple[object, list[int]]]:
    log = open_log(fmt, directory, config, now_ms=0)
    out = []
    for i in range(batches):
        rb = records(3 + i, ts=1000 * i)
        meta = meta_for(rb, producer_id=9, producer_epoch=1, base_sequence=i, leader_epoch=2)
        stored = log.append(rb, meta, now_ms=i)
        out.append((stored, list(range(stored.base_offset, stored.next_offset))))
    log.close()
    return out


def _state(log: PartitionLog) -> tuple[list[object], list[int]]:
    metas = [b.meta for b in log.read(log.log_start_offset, 1 << 30)]
    return metas, log.read_table().column("offset").to_pylist()


def test_torn_last_append_at_every_byte(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    appended = _build(d, 3)
    full = _snapshot(d)
    before_last = tmp_path / "before"
    _build(before_last / "t-0", 2)
    prefix = _snapshot(before_last / "t-0")
    data = f"{ACTIVE}.arrows"
    start, end = len(prefix[data]), len(full[data])
    assert full[data][:start] == prefix[data]
    expect_prefix = ([m for m, _ in appended[:2]], [o for _, offs in appended[:2] for o in offs])
    expect_full = ([m for m, _ in appended], [o for _, offs in appended for o in offs])
    for cut in range(start, end + 1):
        for side_from in (prefix, full):  # side files not yet written / written before the data landed
            files = dict(side_from)
            files[data] = full[data][:cut]
            _restore(d, files)
            ro = PartitionLog.open_readonly(d)
            ro_state = _state(ro)
            ro.close()
            assert _snapshot(d) == files  # the read-only opener changed nothing
            log = PartitionLog.open(d, now_ms=0)
            state = _state(log)
            expected = expect_full if cut == end else expect_prefix
            assert state == expected, (cut, side_from is full)
            assert ro_state == expected
            nxt = log.append(records(1), meta_for(records(1)), now_ms=0)
            assert nxt.base_offset == expected[1][-1] + 1
            log.close()
            if cut % 16 == 0 or cut == end:
                log = PartitionLog.open(d, now_ms=0)
                assert _state(log)[1] == [*expected[1], nxt.base_offset]
                log.close()


def _sealed(d: Path, seg: Segment) -> Written:
    """The files sealing writes for `seg`, left under their temporary names."""
    snap = seg.snapshot()
    if snap.fmt == 2:
        messages = oc.group_for_message(snap.rows(), oc.SEALED_MESSAGE_BYTES)
        return write_rows_segment(d, seg.base_offset, messages, sealed=True)
    return write_segment(d, seg.base_offset, coalesce(snap.blocks()), sealed=True)


def test_torn_format2_append_at_sampled_bytes(tmp_path: Path) -> None:
    """Format 2: a crash part way through the last append (cut at every byte of its first and last
    bytes, every 41st between) leaves the batches before it; the next append follows them."""
    d = tmp_path / "t-0"
    appended = _build(d, 3, fmt=2)
    full = _snapshot(d)
    _build(tmp_path / "before" / "t-0", 2, fmt=2)
    prefix = _snapshot(tmp_path / "before" / "t-0")
    data = f"{ACTIVE}.arrows"
    start, end = len(prefix[data]), len(full[data])
    assert full[data][:start] == prefix[data]
    expect_prefix = ([m for m, _ in appended[:2]], [o for _, offs in appended[:2] for o in offs])
    expect_full = ([m for m, _ in appended], [o for _, offs in appended for o in offs])
    cuts = sorted({*range(start, start + 24), *range(start + 24, end - 8, 41), *range(end - 8, end + 1)})
    for cut in cuts:
        for side_from in (prefix, full):
            files = dict(side_from)
            files[data] = full[data][:cut]
            _restore(d, files)
            ro = PartitionLog.open_readonly(d)
            ro_state = _state(ro)
            ro.close()
            assert _snapshot(d) == files
            log = open_log(2, d)
            expected = expect_full if cut == end else expect_prefix
            assert _state(log) == expected, (cut, side_from is full)
            assert ro_state == expected
            nxt = log.append(records(1), meta_for(records(1)), now_ms=0)
            assert nxt.base_offset == expected[1][-1] + 1
            assert [bytes(b)[:8] for b in log.read_wire(nxt.base_offset, 1 << 20)] == [
                nxt.base_offset.to_bytes(8, "big")]
            log.close()


def test_lost_side_files_are_rebuilt(tmp_path: Path, fmt: int) -> None:
    d = tmp_path / "t-0"
    _build(d, 12, LogConfig(segment_bytes=4000), fmt)
    log = open_log(fmt, d, LogConfig(segment_bytes=4000), now_ms=0)
    log.seal_pending()
    want = _state(log)
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    log.close()
    sealed, active = f"{bases[0]:020d}", f"{bases[-1]:020d}"
    for ext in SIDE:
        (d / (sealed + ext)).unlink()
        (d / (active + ext)).unlink()
    with open(d / f"{bases[1]:020d}.batches", "r+b") as f:  # a torn trailing entry
        f.truncate(os.path.getsize(f.name) - 3)
    rebuilds = Stats.index_rebuilds
    log = open_log(fmt, d, LogConfig(segment_bytes=4000), now_ms=0)
    assert _state(log) == want
    assert Stats.index_rebuilds > rebuilds
    assert (d / (sealed + ".index")).exists()
    log.append(records(2), meta_for(records(2)), now_ms=0)
    log.close()
    log = open_log(fmt, d, LogConfig(segment_bytes=4000), now_ms=0)
    assert _state(log)[1] == [*want[1], want[1][-1] + 1, want[1][-1] + 2]


@pytest.mark.parametrize("stage", ["tmp", "all-swap", "index-renamed", "side-renamed", "stream-unlinked"])
def test_interrupted_seal_swap(tmp_path: Path, stage: str, fmt: int) -> None:
    d = tmp_path / "t-0"
    _build(d, 12, LogConfig(segment_bytes=4000), fmt)
    log = open_log(fmt, d, LogConfig(segment_bytes=4000), now_ms=0)
    want = _state(log)
    seg = log._segments[0]
    written = _sealed(d, seg)
    log.close()
    name = d / f"{seg.base_offset:020d}"
    order = (".index", ".timeindex", ".batches", ".arrow")
    if stage != "tmp":
        for ext in order:
            os.replace(written.tmp[ext], f"{name}{ext}.swap")
        done = {"all-swap": 0, "index-renamed": 1, "side-renamed": 3, "stream-unlinked": 3}[stage]
        for ext in order[:done]:
            os.replace(f"{name}{ext}.swap", f"{name}{ext}")
        if stage == "stream-unlinked":
            os.unlink(f"{name}.arrows")
    log = open_log(fmt, d, LogConfig(segment_bytes=4000), now_ms=0)
    assert _state(log) == want
    assert log._segments[0].sealed == (stage in ("index-renamed", "side-renamed", "stream-unlinked"))
    assert not [p for p in d.iterdir() if p.name.endswith((".swap", ".tmp"))]
    log.close()


def test_readonly_opener_during_a_swap(tmp_path: Path, fmt: int) -> None:
    """A reader opening between the renames of a seal sees the stream data with the sealed
    side files beside it, and must still read the right records."""
    d = tmp_path / "t-0"
    _build(d, 12, LogConfig(segment_bytes=4000), fmt)
    log = open_log(fmt, d, LogConfig(segment_bytes=4000), now_ms=0)
    want = _state(log)
    seg = log._segments[0]
    written = _sealed(d, seg)
    name = d / f"{seg.base_offset:020d}"
    for ext in (".index", ".timeindex", ".batches"):
        os.replace(written.tmp[ext], f"{name}{ext}")
    ro = PartitionLog.open_readonly(d)
    assert _state(ro) == want
    ro.close()
    log.close()


_WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from storage_helpers import meta_for, records
    from pylog.storage import LogConfig, PartitionLog
    log = PartitionLog.open(sys.argv[1], LogConfig(segment_bytes=200_000), now_ms=0)
    i = 0
    while True:
        rb = records(1 + i % 50, ts=i, value_size=200)
        stored = log.append(rb, meta_for(rb), now_ms=i)
        print(stored.last_offset, flush=True)
        i += 1
""")


def test_kill_9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(d), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    acked = -1
    for line in proc.stdout:
        acked = int(line)
        if acked >= 5000:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    log = PartitionLog.open(d, LogConfig(segment_bytes=200_000), now_ms=0)
    assert log.segment_count > 1
    assert log.log_end_offset > acked
    offsets = log.read_table().column("offset").to_pylist()
    assert offsets == list(range(log.log_end_offset))
    log.close()
