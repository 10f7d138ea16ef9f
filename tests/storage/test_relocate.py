"""Moving a partition directory between log dirs: copy passes, the swap, and recovery from a crash
at each step of it (storage.relocate)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pylog.storage import LogConfig, PartitionLog
from pylog.storage.relocate import (
    DuplicatePartitionError,
    find_partition_dirs,
    move_dirs,
    recover_moves,
    swap_in,
    sync_tree,
)
from storage_helpers import meta_for, records

MOVE_ID = "0123456789abcdef0123456789abcdef"


def _log_with(path: Path, batches: int, *, segment_bytes: int = 4096) -> PartitionLog:
    log = PartitionLog.open(path, LogConfig(segment_bytes=segment_bytes), now_ms=0)
    for _ in range(batches):
        rb = records(10, value_size=100)
        log.append(rb, meta_for(rb), now_ms=0)
    return log


def _values(path: Path) -> list[bytes]:
    log = PartitionLog.open_readonly(path)
    try:
        return log.read_table().column("value").to_pylist()
    finally:
        log.close()


def test_copy_passes_then_paused_pass_give_an_identical_log(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir()
    log = _log_with(a / "t-0", 20)
    dirs = move_dirs(log.dir, b, MOVE_ID)
    copied, since = sync_tree(log.dir, dirs.future, 0)
    assert copied > 0
    for _ in range(5):  # appends between passes, rolling segments
        rb = records(10, value_size=100)
        log.append(rb, meta_for(rb), now_ms=0)
    again, since = sync_tree(log.dir, dirs.future, since)
    assert again > 0  # the appended batches (and, this soon, files touched within a second)
    with log.paused():
        sync_tree(log.dir, dirs.future, since)
        end = log.log_end_offset
        log.close()
    final = swap_in(a / "t-0", dirs)
    assert final == b / "t-0" and not (a / "t-0").exists() and not dirs.delete.exists()
    moved = PartitionLog.open(final, LogConfig(segment_bytes=4096), now_ms=0)
    assert moved.log_end_offset == end == 250
    moved.close()
    assert len(_values(final)) == 250


def test_a_crash_before_the_swap_keeps_the_source(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir()
    log = _log_with(a / "t-0", 3)
    dirs = move_dirs(log.dir, b, MOVE_ID)
    sync_tree(log.dir, dirs.future, 0)
    log.close()
    done = recover_moves([a, b])
    assert not dirs.future.exists() and (a / "t-0").is_dir() and len(done) == 1
    assert len(_values(a / "t-0")) == 30


def test_a_crash_between_the_renames_completes_the_move(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir()
    log = _log_with(a / "t-0", 3)
    dirs = move_dirs(log.dir, b, MOVE_ID)
    sync_tree(log.dir, dirs.future, 0)
    log.close()
    (a / "t-0").rename(dirs.delete)  # the first rename of swap_in, then the crash
    recover_moves([a, b])
    assert (b / "t-0").is_dir() and not dirs.delete.exists() and not dirs.future.exists()
    assert len(_values(b / "t-0")) == 30
    assert find_partition_dirs([a, b]) == {("t", 0): b / "t-0"}


def test_a_crash_after_the_swap_removes_the_old_copy(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    b.mkdir()
    log = _log_with(a / "t-0", 3)
    dirs = move_dirs(log.dir, b, MOVE_ID)
    sync_tree(log.dir, dirs.future, 0)
    log.close()
    (a / "t-0").rename(dirs.delete)
    dirs.future.rename(b / "t-0")
    recover_moves([a, b])
    assert not dirs.delete.exists() and (b / "t-0").is_dir()


def test_a_partition_in_two_log_dirs_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _log_with(a / "t-3", 1).close()
    _log_with(b / "t-3", 1).close()
    _log_with(b / "u-0", 1).close()
    with pytest.raises(DuplicatePartitionError, match="t-3 is in two log directories"):
        find_partition_dirs([a, b])
    assert find_partition_dirs([b]) == {("t", 3): b / "t-3", ("u", 0): b / "u-0"}


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_files_are_copied_whole_with_or_without_copy_file_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_copy: bool
) -> None:
    import os

    if not kernel_copy:
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    data = os.urandom(9 << 20)  # more than one chunk
    (src / "00000000000000000000.arrow").write_bytes(data)
    (src / "leader-epoch-checkpoint").write_bytes(b"0\n0\n")
    (src / "x.tmp").write_bytes(b"a rewrite's temporary file")
    for p in src.iterdir():  # written a minute ago (not in the filesystem clock's current tick)
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))
    copied, since = sync_tree(src, dst, 0)
    assert copied == len(data) + 4 and since > 0
    assert (dst / "00000000000000000000.arrow").read_bytes() == data
    assert sorted(p.name for p in dst.iterdir()) == ["00000000000000000000.arrow", "leader-epoch-checkpoint"]
    (src / "leader-epoch-checkpoint").unlink()
    assert sync_tree(src, dst, since)[0] == 0  # nothing changed since: nothing copied, the removed file goes
    assert [p.name for p in dst.iterdir()] == ["00000000000000000000.arrow"]
