"""Durable Raft storage for ``__cluster_metadata``: a log file, snapshot files, a quorum-state file.

Layout under ``<data_dir>/__cluster_metadata-0/``:

* ``<first index, 20 digits>.log`` — the entries after the latest snapshot, one
  append-only frame each; the name carries the index of its first entry, as Kafka's
  segment names carry their base offset (a log from before snapshots existed is
  named ``00000000000000000000.log`` and is renamed to ``...01.log`` on open)::

      length  u32 BE   bytes after this field (crc + term + index + data)
      crc     u32 BE   CRC-32C of term + index + data
      term    u64 BE
      index   u64 BE
      data    bytes    the entry payload (a JSON record batch; empty for a leader's no-op)

  On open the file is scanned; the first incomplete, corrupt or out-of-sequence frame
  and everything after it is a torn tail from a crash and is truncated.
* ``<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`` — a snapshot, named as
  KRaft names its snapshots: the end offset is the index after the last entry it
  covers (the first index of the log that follows it), the epoch that entry's term::

      magic   4 bytes  b"PLSN" (or b"PLS1": a control section follows the header)
      crc     u32 BE   CRC-32C of everything after this field
      index   u64 BE   last entry covered
      term    u64 BE   its term
      length  u64 BE   length of data
      [control length u32 BE, control bytes]   PLS1 only: the voters and kraft.version as of
                       ``index`` (a control entry's JSON, Kafka's snapshot header records)
      data    bytes    the application's snapshot, opaque here

  A checkpoint whose size, CRC or name does not check out is ignored in favour of
  an older one (and removed).
* ``quorum-state`` — JSON ``{"term", "vote", "commit", ...}``.

Every whole-file write is atomic: a temporary file (``.part`` for a checkpoint,
``.cleaned`` for a log, ``.tmp`` for the state), fsync, rename, fsync the directory.
Entries are written before the hard state, so a persisted commit index never points
past the persisted log (it is clamped on load anyway).

Installing a snapshot (one the application took, or one received from the leader)
goes in steps: (1) write the checkpoint; (2) write the entries after it — only if
the log holds the snapshot's last entry with its term, else none — to a new log
named after its first index; (3) delete the old log; (4) delete older checkpoints,
which are kept only until the log has been cut. Opening the directory repairs a
crash between any two steps: leftover temporary files are deleted, the newest
valid checkpoint wins, the log with the highest first index that leaves no gap
after it is used, an unfinished cut is finished, and the other logs and older
checkpoints are deleted.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import crc32c

from pylog.cluster.raft_types import Entry, HardState, Ready, Snapshot
from pylog.cluster.voters import ControlBatch, ControlRecordError, decode_control, encode_control

METADATA_DIR = "__cluster_metadata-0"
STATE_FILE = "quorum-state"
LOG_SUFFIX = ".log"
CHECKPOINT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
CLEANED_SUFFIX = ".cleaned"
_LEGACY_LOG = "0" * 20 + LOG_SUFFIX

_HEAD = struct.Struct(">II")  # length, crc
_BODY = struct.Struct(">QQ")  # term, index
_MAX_FRAME = 64 * 1024 * 1024
_SNAP_MAGIC = b"PLSN"
_SNAP_MAGIC_CONTROL = b"PLS1"
_U32 = struct.Struct(">I")
_SNAP_HEAD = struct.Struct(">4sI")  # magic, crc
_SNAP_META = struct.Struct(">QQQ")  # index, term, length
_LOG_NAME = re.compile(r"^(\d{20})\.log$")
_CHECKPOINT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class MetadataLogError(Exception):
    """The metadata log directory cannot be recovered (nothing was changed in it)."""


def log_file_name(first_index: int) -> str:
    return f"{first_index:020d}{LOG_SUFFIX}"


def checkpoint_file_name(snap: Snapshot) -> str:
    return f"{snap.index + 1:020d}-{snap.term:010d}{CHECKPOINT_SUFFIX}"


LOG_FILE = log_file_name(1)  # the log of a node that never took or received a snapshot


def encode_frame(entry: Entry) -> bytes:
    body = _BODY.pack(entry.term, entry.index) + entry.data
    return _HEAD.pack(len(body) + 4, crc32c.crc32c(body)) + body


def scan_frames(buf: bytes, first_index: int = 1) -> tuple[list[Entry], list[int], int]:
    """Parse frames; returns (entries, file position of each, length of the valid prefix)."""
    entries: list[Entry] = []
    positions: list[int] = []
    pos = 0
    expected = first_index
    while pos + _HEAD.size <= len(buf):
        length, crc = _HEAD.unpack_from(buf, pos)
        end = pos + 4 + length
        if length < 4 + _BODY.size or length > _MAX_FRAME or end > len(buf):
            break
        body = buf[pos + _HEAD.size : end]
        if crc32c.crc32c(body) != crc:
            break
        term, index = _BODY.unpack_from(body)
        if index != expected:
            break
        entries.append(Entry(term, index, bytes(body[_BODY.size :])))
        positions.append(pos)
        expected += 1
        pos = end
    return entries, positions, pos


def encode_checkpoint(snap: Snapshot) -> bytes:
    control = b""
    if snap.voters is not None or snap.kraft_version:
        control = encode_control(ControlBatch(snap.kraft_version, snap.voters))
    magic = _SNAP_MAGIC_CONTROL if control else _SNAP_MAGIC
    rest = _SNAP_META.pack(snap.index, snap.term, len(snap.data))
    if control:
        rest += _U32.pack(len(control)) + control
    rest += snap.data
    return _SNAP_HEAD.pack(magic, crc32c.crc32c(rest)) + rest


def decode_checkpoint(buf: bytes) -> Snapshot | None:
    """The snapshot in a checkpoint file's bytes, or None if they are torn or corrupt."""
    if len(buf) < _SNAP_HEAD.size + _SNAP_META.size:
        return None
    magic, crc = _SNAP_HEAD.unpack_from(buf)
    if magic not in (_SNAP_MAGIC, _SNAP_MAGIC_CONTROL) or crc32c.crc32c(buf[_SNAP_HEAD.size :]) != crc:
        return None
    index, term, length = _SNAP_META.unpack_from(buf, _SNAP_HEAD.size)
    start = _SNAP_HEAD.size + _SNAP_META.size
    batch = ControlBatch()
    if magic == _SNAP_MAGIC_CONTROL:
        if len(buf) < start + _U32.size:
            return None
        (clen,) = _U32.unpack_from(buf, start)
        try:
            batch = decode_control(bytes(buf[start + _U32.size : start + _U32.size + clen]))
        except ControlRecordError:
            return None
        start += _U32.size + clen
    if length != len(buf) - start:
        return None
    return Snapshot(index, term, bytes(buf[start:]), batch.voters, batch.kraft_version or 0)


class MetadataLogStore:
    """A ``RaftStorage`` on disk (see the module docstring); single writer, not thread-safe.

    ``failpoint``, when set, is called with the name of each durable step as it
    completes; tests raise from it to crash the store there.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        fsync: bool = True,
        failpoint: Callable[[str], None] | None = None,
    ) -> None:
        self.dir = Path(data_dir) / METADATA_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self.failpoint = failpoint
        self.state_path = self.dir / STATE_FILE
        self.truncated_bytes = 0  # size of the torn tail removed on open
        self.removed_checkpoints: list[str] = []  # corrupt checkpoint files removed on open
        self.extra_state: dict[str, object] = {}
        self._snapshot: Snapshot | None = None
        self._first = 1
        self._entries: list[Entry] = []
        self._positions: list[int] = []
        self._end = 0
        self.synced_end = 0  # log bytes known to be durable (what a power loss keeps)
        self._recover()
        self._hard_state = self._load_state()

    # ------------------------------------------------------------------ RaftStorage

    def hard_state(self) -> HardState:
        return self._hard_state

    def entries(self) -> Sequence[Entry]:
        return list(self._entries)

    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    # ------------------------------------------------------------------ status

    @property
    def first_index(self) -> int:
        return self._first

    @property
    def last_index(self) -> int:
        return self._first + len(self._entries) - 1

    @property
    def bytes_since_snapshot(self) -> int:
        """Bytes of the entries after the latest snapshot (compare with
        ``metadata.log.max.record.bytes.between.snapshots``)."""
        return self._end

    @property
    def log_path(self) -> Path:
        return self.dir / log_file_name(self._first)

    # ------------------------------------------------------------------ writes

    def save(self, ready: Ready) -> None:
        """Persist a Ready in ``Ready``'s order: received snapshot, entries, hard state, taken snapshot."""
        if ready.snapshot is not None:
            self.install_snapshot(ready.snapshot, keep_suffix=False)
        if ready.entries:
            self._append(ready.entries)
        if ready.hard_state is not None:
            self._write_state(ready.hard_state)
        if ready.snapshot_taken is not None:
            self.install_snapshot(ready.snapshot_taken)

    def install_snapshot(self, snap: Snapshot, *, keep_suffix: bool = True) -> None:
        """Write ``snap``, then cut the log so it starts after it (see the module docstring).

        The entries after the snapshot are kept when ``keep_suffix`` and the log holds the
        snapshot's last entry; a snapshot received from the leader replaces the whole log.
        """
        if self._snapshot is not None and snap.index <= self._snapshot.index:
            raise ValueError(f"snapshot at {snap.index} is not newer than the one at {self._snapshot.index}")
        path = self.dir / checkpoint_file_name(snap)
        self._write_atomic(path, encode_checkpoint(snap), "checkpoint")
        self._snapshot = snap
        self._cut_log(snap, keep_suffix)
        self._remove_checkpoints_before(snap)

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()

    # ------------------------------------------------------------------ recovery

    def _recover(self) -> None:
        names = sorted(os.listdir(self.dir))
        for name in names:  # leftovers of an interrupted atomic write
            if name.endswith((PART_SUFFIX, CLEANED_SUFFIX)) or name == STATE_FILE + ".tmp":
                (self.dir / name).unlink()
        if _LEGACY_LOG in names and LOG_FILE not in names:
            os.replace(self.dir / _LEGACY_LOG, self.dir / LOG_FILE)
            self._sync_dir()
            names = sorted(os.listdir(self.dir))

        checkpoints: list[tuple[int, str]] = []
        logs: dict[int, str] = {}
        for name in names:
            if m := _CHECKPOINT_NAME.match(name):
                checkpoints.append((int(m.group(1)), name))
            elif m := _LOG_NAME.match(name):
                logs[int(m.group(1))] = name
        corrupt: list[str] = []
        snap: Snapshot | None = None
        checkpoint_name: str | None = None
        for _, name in sorted(checkpoints, reverse=True):
            found = decode_checkpoint((self.dir / name).read_bytes())
            if found is not None and checkpoint_file_name(found) == name:
                snap, checkpoint_name = found, name
                break
            corrupt.append(name)
        start = snap.index if snap is not None else 0
        usable = [first for first in logs if first <= start + 1]
        if logs and not usable:
            raise MetadataLogError(
                f"{self.dir}: the metadata log starts at {min(logs)} but no valid snapshot covers "
                f"the entries before it (corrupt: {', '.join(corrupt) or 'none'})"
            )
        self._snapshot = snap
        first = max(usable) if usable else start + 1
        self._open_log(first, logs.get(first))
        if first <= start:
            assert snap is not None
            self._cut_log(snap)  # a crash stopped an install between the checkpoint and the cut
        for name in logs.values():
            if name != log_file_name(self._first) and (self.dir / name).exists():
                (self.dir / name).unlink()
        for _, name in checkpoints:
            if name != checkpoint_name:
                (self.dir / name).unlink()
        self.removed_checkpoints = corrupt
        self._sync_dir()

    def _open_log(self, first: int, name: str | None) -> None:
        path = self.dir / log_file_name(first)
        buf = path.read_bytes() if name is not None else b""
        self._first = first
        self._entries, self._positions, valid = scan_frames(buf, first)
        self._file = open(path, "r+b" if name is not None else "w+b")  # noqa: SIM115
        if valid < len(buf):
            self.truncated_bytes = len(buf) - valid
            self._file.truncate(valid)
            self._sync_file()
        elif name is None:
            self._sync_file()
            self._sync_dir()
        self._end = self.synced_end = valid

    def _load_state(self) -> HardState:
        last_term = self._entries[-1].term if self._entries else 0
        snap_index = snap_term = 0
        if self._snapshot is not None:
            snap_index, snap_term = self._snapshot.index, self._snapshot.term
        try:
            raw = json.loads(self.state_path.read_text())
            hs = HardState(int(raw["term"]), raw.get("vote"), int(raw.get("commit", 0)))
        except FileNotFoundError:
            hs = HardState()
        # A lost or stale state file must not leave the term below the log's or snapshot's last term.
        term = max(hs.term, last_term, snap_term)
        vote = hs.vote if term == hs.term else None
        return HardState(term, vote, max(min(hs.commit, self.last_index), snap_index))

    # ------------------------------------------------------------------ internals

    def _append(self, entries: Sequence[Entry]) -> None:
        first = entries[0].index
        if first < self._first or first > self.last_index + 1:
            raise ValueError(f"entries start at {first}, the log holds {self._first}..{self.last_index}")
        keep = first - self._first
        if keep < len(self._entries):  # a follower replacing a conflicting suffix
            self._end = self._positions[keep]
            self.synced_end = min(self.synced_end, self._end)
            del self._entries[keep:]
            del self._positions[keep:]
            self._file.truncate(self._end)
        chunks = []
        pos = self._end
        for e in entries:
            frame = encode_frame(e)
            self._positions.append(pos)
            chunks.append(frame)
            pos += len(frame)
        self._entries.extend(entries)
        self._file.seek(self._end)
        self._file.write(b"".join(chunks))
        self._end = pos
        self._step("entries-written")
        self._sync_file()
        self._step("entries-synced")

    def _cut_log(self, snap: Snapshot, keep_suffix: bool = True) -> None:
        """Replace the log by one holding only the entries after ``snap`` (if it holds its last entry)."""
        pos = snap.index - self._first
        keep: list[Entry] = []
        if keep_suffix and 0 <= pos < len(self._entries) and self._entries[pos].term == snap.term:
            keep = self._entries[pos + 1 :]
        old_path = self.log_path
        first = snap.index + 1
        new_path = self.dir / log_file_name(first)
        frames = [encode_frame(e) for e in keep]
        self._write_atomic(new_path, b"".join(frames), "log")
        self._file.close()
        if old_path != new_path:
            old_path.unlink()
            self._sync_dir()
            self._step("old-log-deleted")
        self._first = first
        self._entries = list(keep)
        self._positions = []
        end = 0
        for f in frames:
            self._positions.append(end)
            end += len(f)
        self._end = self.synced_end = end
        self._file = open(new_path, "r+b")  # noqa: SIM115

    def _remove_checkpoints_before(self, snap: Snapshot) -> None:
        keep = checkpoint_file_name(snap)
        removed = False
        for name in os.listdir(self.dir):
            if _CHECKPOINT_NAME.match(name) and name != keep:
                (self.dir / name).unlink()
                removed = True
        if removed:
            self._sync_dir()
            self._step("old-checkpoints-deleted")

    def _write_atomic(self, path: Path, data: bytes, what: str) -> None:
        suffix = {"checkpoint": PART_SUFFIX, "log": CLEANED_SUFFIX}.get(what, ".tmp")
        tmp = path.with_name(path.name + suffix)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if self._fsync:
                os.fsync(f.fileno())
        self._step(f"{what}-written")
        os.replace(tmp, path)
        self._sync_dir()
        self._step(f"{what}-renamed")

    def _step(self, name: str) -> None:
        if self.failpoint is not None:
            self.failpoint(name)

    def _sync_file(self) -> None:
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        self.synced_end = self._end

    def _sync_dir(self) -> None:
        if self._fsync:
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _write_state(self, hs: HardState) -> None:
        payload = {"term": hs.term, "vote": hs.vote, "commit": hs.commit, **self.extra_state}
        self._write_atomic(self.state_path, json.dumps(payload).encode(), "state")
        self._hard_state = hs
