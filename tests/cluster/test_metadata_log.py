"""MetadataLogStore: snapshot files, the log cut after them, and recovery from a crash at every step."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pylog.cluster.metadata_log import (
    LOG_FILE,
    METADATA_DIR,
    MetadataLogError,
    MetadataLogStore,
    checkpoint_file_name,
    decode_checkpoint,
    encode_checkpoint,
    log_file_name,
)
from pylog.cluster.raft_types import Entry, HardState, Ready, Role, Snapshot


def ready(
    entries: list[Entry] = (),  # type: ignore[assignment]
    hs: HardState | None = None,
    *,
    snapshot: Snapshot | None = None,
    taken: Snapshot | None = None,
) -> Ready:
    return Ready(hs, tuple(entries), (), (), Role.FOLLOWER, None, snapshot=snapshot, snapshot_taken=taken)


def entries(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, f"e{i}".encode()) for i in range(lo, hi + 1)]


def files(tmp_path: Path) -> list[str]:
    return sorted(os.listdir(tmp_path / METADATA_DIR))


class Crash(Exception):
    pass


def test_snapshot_cuts_the_log_and_survives_reopen(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    assert files(tmp_path) == [LOG_FILE] and LOG_FILE == "00000000000000000001.log"
    store.save(ready(entries(1, 10), HardState(1, 1, 10)))
    size_before = store.bytes_since_snapshot
    snap = Snapshot(6, 1, b"state@6")
    store.save(ready(taken=snap))
    assert files(tmp_path) == [
        "00000000000000000007-0000000001.checkpoint",
        "00000000000000000007.log",
        "quorum-state",
    ]
    assert store.first_index == 7 and store.last_index == 10
    assert 0 < store.bytes_since_snapshot < size_before
    store.save(ready(entries(11, 12)))
    store.close()

    again = MetadataLogStore(tmp_path, fsync=False)
    assert again.snapshot() == snap
    assert [e.index for e in again.entries()] == [7, 8, 9, 10, 11, 12]
    assert again.hard_state() == HardState(1, 1, 10)
    # A second snapshot replaces the first one, which is no longer needed.
    again.save(ready(taken=Snapshot(11, 1, b"state@11")))
    assert files(tmp_path) == [
        "00000000000000000012-0000000001.checkpoint",
        "00000000000000000012.log",
        "quorum-state",
    ]
    assert [e.index for e in again.entries()] == [12]
    with pytest.raises(ValueError, match="not newer"):
        again.save(ready(taken=Snapshot(11, 1, b"again")))
    again.close()


def test_received_snapshot_replaces_the_whole_log(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 5), HardState(2, None, 3)))
    snap = Snapshot(20, 3, b"leader-state")
    # The leader's snapshot, then entries after it in the same Ready, then the hard state.
    store.save(ready(entries(21, 22, term=3), HardState(3, None, 20), snapshot=snap))
    store.close()
    again = MetadataLogStore(tmp_path, fsync=False)
    assert again.snapshot() == snap
    assert [(e.index, e.term) for e in again.entries()] == [(21, 3), (22, 3)]
    assert again.hard_state() == HardState(3, None, 20)
    assert files(tmp_path) == [checkpoint_file_name(snap), log_file_name(21), "quorum-state"]
    again.close()


def test_received_snapshot_drops_even_a_matching_suffix(tmp_path: Path) -> None:
    # The core only restores when its log does not hold the snapshot's last entry;
    # the store follows it and starts an empty log.
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 5)))
    store.save(ready(snapshot=Snapshot(3, 1, b"s")))
    assert store.entries() == [] and store.first_index == 4 and store.last_index == 3
    store.close()


def test_hard_state_is_raised_to_the_snapshot_after_a_crash(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 3), HardState(1, 2, 1)))
    store.close()
    # Crash after the snapshot was installed, before the hard state of the same Ready.
    store = MetadataLogStore(tmp_path, fsync=False)
    store.install_snapshot(Snapshot(9, 4, b"s"), keep_suffix=False)
    store.close()
    again = MetadataLogStore(tmp_path, fsync=False)
    assert again.hard_state() == HardState(4, None, 9)
    again.close()


def test_torn_tail_after_a_snapshot_is_truncated(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 8)))
    store.save(ready(taken=Snapshot(5, 1, b"s")))
    store.save(ready(entries(9, 10)))
    path, last_pos = store.log_path, store._positions[-1]
    store.close()
    good = path.read_bytes()
    path.write_bytes(good[: last_pos + 7])  # half of entry 10 reached the disk
    again = MetadataLogStore(tmp_path, fsync=False)
    assert again.truncated_bytes == 7 and again.last_index == 9 and again.first_index == 6
    assert path.read_bytes() == good[:last_pos]
    again.close()


def test_log_from_before_snapshots_is_renamed(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 3)))
    store.close()
    d = tmp_path / METADATA_DIR
    os.replace(d / LOG_FILE, d / ("0" * 20 + ".log"))
    again = MetadataLogStore(tmp_path, fsync=False)
    assert [e.index for e in again.entries()] == [1, 2, 3]
    assert files(tmp_path) == [LOG_FILE]
    again.close()


def test_checkpoint_codec_rejects_torn_and_corrupt_files() -> None:
    snap = Snapshot(41, 7, b"x" * 100)
    buf = encode_checkpoint(snap)
    assert decode_checkpoint(buf) == snap
    assert checkpoint_file_name(snap) == "00000000000000000042-0000000007.checkpoint"
    for cut in (0, 3, 10, len(buf) - 1):
        assert decode_checkpoint(buf[:cut]) is None
    flipped = bytearray(buf)
    flipped[40] ^= 1
    assert decode_checkpoint(bytes(flipped)) is None
    assert decode_checkpoint(buf + b"\0") is None


def test_corrupt_newest_checkpoint_falls_back_to_an_older_one(tmp_path: Path) -> None:
    # A crash before the log was cut leaves the old checkpoint and the old log: if the
    # new checkpoint is then found corrupt, the older one plus the old log still work.
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 10)))
    store.save(ready(taken=Snapshot(3, 1, b"s3")))

    def crash_before_cut(step: str) -> None:
        if step == "checkpoint-renamed":
            raise Crash

    store.failpoint = crash_before_cut
    with pytest.raises(Crash):
        store.save(ready(taken=Snapshot(8, 1, b"s8")))
    store.close()
    d = tmp_path / METADATA_DIR
    newest = d / checkpoint_file_name(Snapshot(8, 1, b""))
    newest.write_bytes(newest.read_bytes()[:-1])  # torn
    again = MetadataLogStore(tmp_path, fsync=False)
    assert again.removed_checkpoints == [newest.name]
    assert again.snapshot() == Snapshot(3, 1, b"s3")
    assert [e.index for e in again.entries()] == list(range(4, 11))
    assert files(tmp_path) == [checkpoint_file_name(Snapshot(3, 1, b"")), log_file_name(4)]
    again.close()


def test_corrupt_checkpoint_with_no_log_before_it_is_an_error(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 10)))
    store.save(ready(taken=Snapshot(8, 1, b"s8")))
    store.close()
    d = tmp_path / METADATA_DIR
    path = d / checkpoint_file_name(Snapshot(8, 1, b""))
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    before = {name: (d / name).read_bytes() for name in files(tmp_path)}
    with pytest.raises(MetadataLogError, match="starts at 9 but no valid snapshot"):
        MetadataLogStore(tmp_path, fsync=False)
    assert {name: (d / name).read_bytes() for name in files(tmp_path)} == before  # nothing touched


INSTALL_STEPS = [
    "checkpoint-written",
    "checkpoint-renamed",
    "log-written",
    "log-renamed",
    "old-log-deleted",
    "old-checkpoints-deleted",
]


@pytest.mark.parametrize("received", [False, True], ids=["taken", "received"])
def test_crash_at_every_step_of_a_snapshot_install(tmp_path: Path, received: bool) -> None:
    base = tmp_path / "base"
    store = MetadataLogStore(base, fsync=False)
    store.save(ready(entries(1, 12), HardState(2, 1, 9)))
    store.save(ready(taken=Snapshot(4, 1, b"s4")))
    store.close()
    new = Snapshot(9, 1, b"s9") if not received else Snapshot(30, 5, b"leader")
    # Without a crash: which steps does an install take, and what is the result?
    seen: list[str] = []
    clean = tmp_path / "clean"
    shutil.copytree(base, clean)
    store = MetadataLogStore(clean, fsync=False, failpoint=seen.append)
    store.save(ready(snapshot=new) if received else ready(taken=new))
    after = (store.snapshot(), store.entries())
    store.close()
    assert [s for s in seen if s in INSTALL_STEPS] == INSTALL_STEPS
    opened = MetadataLogStore(base, fsync=False)
    before = (opened.snapshot(), opened.entries())
    opened.close()

    for k, step in enumerate(seen):
        d = tmp_path / f"crash-{k}"
        shutil.copytree(base, d)

        def crash_here(name: str, step: str = step) -> None:
            if name == step:
                raise Crash(step)

        store = MetadataLogStore(d, fsync=False, failpoint=crash_here)
        with pytest.raises(Crash):
            store.save(ready(snapshot=new) if received else ready(taken=new))
        store.close()
        reopened = MetadataLogStore(d, fsync=False)
        state = (reopened.snapshot(), reopened.entries())
        # Before the checkpoint is renamed into place the old state wins; from then on the new one.
        expected = before if step == "checkpoint-written" else after
        assert state == expected, f"crash at {step}"
        snap = expected[0]
        assert files(d) == [checkpoint_file_name(snap), log_file_name(snap.index + 1), "quorum-state"], step
        # The store works on: append after the end and reopen once more.
        nxt = reopened.last_index + 1
        reopened.save(ready([Entry(5, nxt, b"next")]))
        reopened.close()
        final = MetadataLogStore(d, fsync=False)
        assert final.last_index == nxt and final.entries()[-1].data == b"next"
        final.close()


def test_leftover_temporary_files_are_removed(tmp_path: Path) -> None:
    store = MetadataLogStore(tmp_path, fsync=False)
    store.save(ready(entries(1, 3), HardState(1, None, 3)))
    store.close()
    d = tmp_path / METADATA_DIR
    (d / "00000000000000000004-0000000001.checkpoint.part").write_bytes(b"half a snapshot")
    (d / "00000000000000000004.log.cleaned").write_bytes(b"half a log")
    (d / "quorum-state.tmp").write_bytes(b"{")
    again = MetadataLogStore(tmp_path, fsync=False)
    assert files(tmp_path) == [LOG_FILE, "quorum-state"]
    assert again.last_index == 3 and again.hard_state().commit == 3
    again.close()
