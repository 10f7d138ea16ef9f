"""The active segment's `.wire`: each batch's bytes appended as it is written, kept by sealing
instead of encoding again, and never served wrong after a crash (a torn or stale file is cut to
the batches it holds, or dropped and encoded at seal)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pylog.storage import BatchMeta, LogConfig, PartitionLog, Stats
from pylog.storage.wire import WIRE_EXT
from storage_helpers import meta_for, records
from test_wire_file import encode

# `.wire` files belong to format 1 (format 2 keeps the producers' bytes in its data file)
CFG = LogConfig(segment_bytes=3000, segment_format=1)


class CountingEncoder:
    """The broker's encoder for sealing, counting its calls (proves what sealing did not encode)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, meta: BatchMeta, rows: pa.RecordBatch) -> bytes:
        self.calls += 1
        return encode(meta, rows)


def _append(log: PartitionLog, i: int, *, with_wire: bool = True) -> BatchMeta:
    rb = records(5, value_size=40 + i)
    rows = {}

    def source(stored: BatchMeta) -> bytes:
        # what the broker has: the producer's bytes patched with the stored offset and epoch
        offsets = pa.array(range(stored.base_offset, stored.base_offset + rb.num_rows), pa.int64())
        rows["b"] = encode(stored, rb.set_column(0, rb.schema.field(0), offsets))
        return rows["b"]

    return log.append(rb, meta_for(rb, leader_epoch=2), now_ms=i, wire=source if with_wire else None)


def _open(path: Path, cfg: LogConfig = CFG) -> tuple[PartitionLog, CountingEncoder]:
    log = PartitionLog.open(path, cfg, now_ms=0)
    enc = CountingEncoder()
    log.wire_encoder = enc
    return log, enc


def _wire_of(path: Path, base: int) -> Path:
    return path / f"{base:020d}{WIRE_EXT}"


def _expected(log: PartitionLog, start: int, end: int) -> bytes:
    return b"".join(encode(b.meta, b.records) for b in log.read(start, 1 << 30, max_offset=end))


def test_appended_bytes_are_the_encoding_of_each_stored_batch(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, _ = _open(path, LogConfig(segment_format=1))
    stored = [_append(log, i) for i in range(4)]
    want = b"".join(encode(b.meta, b.records) for b in log.read(0, 1 << 30))
    assert _wire_of(path, 0).read_bytes() == want  # byte-identical to encoding, in `.batches` order
    entries = log.batch_metadata()
    assert entries["size"].sum() == len(want) and [s.base_offset for s in stored] == [0, 5, 10, 15]
    log.close()


def test_sealing_keeps_the_active_wire_without_encoding(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, enc = _open(path)
    for i in range(12):
        _append(log, i)
    bases = log.segment_base_offsets()
    assert len(bases) >= 3
    before = {b: _wire_of(path, b).read_bytes() for b in bases[:-1]}
    kept = Stats.wire_kept
    assert log.seal_pending() == len(bases) - 1
    assert enc.calls == 0 and Stats.wire_kept - kept == len(bases) - 1
    for k, b in enumerate(bases[:-1]):
        assert _wire_of(path, b).read_bytes() == before[b] == _expected(log, b, bases[k + 1])
    got = log.read_wire(0, 1 << 30, max_offset=bases[-1])
    assert all(type(x) is memoryview for x in got)  # served from the kept file
    assert b"".join(bytes(x) for x in got) == _expected(log, 0, bases[-1])
    log.close()


def test_torn_tail_after_a_crash_is_cut_and_appending_goes_on(tmp_path: Path) -> None:
    """The kernel kept part of a `.wire` write past the batches `.batches` knows: the next append
    cuts it back to them, and the file stays whole (kept at seal)."""
    path = tmp_path / "t-0"
    log, _ = _open(path, LogConfig(segment_format=1))
    for i in range(3):
        _append(log, i)
    log.close()
    with open(_wire_of(path, 0), "ab") as f:
        f.write(b"\x00" * 37)  # a torn write of a batch that never reached `.batches`
    log, _ = _open(path, LogConfig(segment_format=1))
    _append(log, 3)
    assert _wire_of(path, 0).read_bytes() == _expected(log, 0, log.log_end_offset)
    log.close()


def test_short_or_stale_wire_is_dropped_and_encoded_at_seal(tmp_path: Path) -> None:
    for damage in ("short", "stale"):
        path = tmp_path / f"{damage}-0"
        log, _ = _open(path)
        for i in range(2):
            _append(log, i)
        log.close()
        wire = _wire_of(path, 0)
        raw = bytearray(wire.read_bytes())
        if damage == "short":  # a crash before the last batch's bytes reached the file
            del raw[-20:]
        else:  # a file from another layout: the second batch's base offset does not match
            raw[len(raw) // 2 + 3] ^= 0xFF
            raw[: 8] = (999).to_bytes(8, "big")
        wire.write_bytes(bytes(raw))
        rejected = Stats.wire_rejected
        log, enc = _open(path)
        for i in range(2, 12):
            _append(log, i)
        bases = log.segment_base_offsets()
        log.seal_pending()
        assert enc.calls > 0  # the first segment was encoded again
        assert _wire_of(path, 0).read_bytes() == _expected(log, 0, bases[1])
        got = log.read_wire(0, 1 << 30, max_offset=bases[1])
        assert all(type(x) is memoryview for x in got) and Stats.wire_rejected == rejected
        assert b"".join(bytes(x) for x in got) == _expected(log, 0, bases[1])
        log.close()


def test_torn_wire_of_a_rolled_segment_is_encoded_at_seal(tmp_path: Path) -> None:
    """A crash left a rolled (unsealed) segment whose `.wire` lacks its last batch: sealing after
    the restart sees the mismatch and encodes; the damaged bytes are never served."""
    path = tmp_path / "t-0"
    log, _ = _open(path)
    for i in range(8):
        _append(log, i)
    bases = log.segment_base_offsets()
    log.close()
    wire = _wire_of(path, bases[0])
    wire.write_bytes(wire.read_bytes()[:-5])
    log, enc = _open(path)
    kept = Stats.wire_kept
    log.seal_pending()
    assert enc.calls > 0 and Stats.wire_kept - kept == len(bases) - 2
    assert _wire_of(path, bases[0]).read_bytes() == _expected(log, 0, bases[1])
    log.close()


def test_a_batch_without_bytes_drops_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, enc = _open(path)
    _append(log, 0)
    _append(log, 1, with_wire=False)  # e.g. compression.type differs from the producer's codec
    assert not _wire_of(path, 0).exists()
    for i in range(2, 12):
        _append(log, i)
    bases = log.segment_base_offsets()
    log.seal_pending()
    assert enc.calls >= 2  # the first segment's batches were encoded
    assert _wire_of(path, 0).read_bytes() == _expected(log, 0, bases[1])
    log.close()


def test_truncation_drops_the_active_wire_and_seal_encodes(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, enc = _open(path, LogConfig(segment_format=1))
    for i in range(4):
        _append(log, i)
    log.truncate_to(10)
    assert not _wire_of(path, 0).exists()
    _append(log, 4)
    assert not _wire_of(path, 0).exists()  # the batches cut away are not known: encoded at seal
    log.roll()
    log.seal_pending()
    assert enc.calls == 3
    assert _wire_of(path, 0).read_bytes() == _expected(log, 0, log.log_end_offset)
    log.close()


def test_config_off_writes_no_active_wire(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log, _ = _open(path, LogConfig(segment_wire=False, segment_format=1))
    _append(log, 0)
    assert not _wire_of(path, 0).exists()
    log.close()
