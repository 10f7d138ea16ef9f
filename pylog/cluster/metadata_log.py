"""Durable Raft storage for ``__cluster_metadata``: an entry file plus a quorum-state file.

Layout under ``<data_dir>/__cluster_metadata-0/``:

* ``00000000000000000000.log`` — append-only frames, one per Raft entry::

      length  u32 BE   bytes after this field (crc + term + index + data)
      crc     u32 BE   CRC-32C of term + index + data
      term    u64 BE
      index   u64 BE
      data    bytes    the entry payload (a JSON record batch; empty for a leader's no-op)

  On open the file is scanned; the first incomplete, corrupt or out-of-sequence frame
  and everything after it is a torn tail from a crash and is truncated.
* ``quorum-state`` — JSON ``{"term", "vote", "commit", ...}``, replaced atomically
  (write a temp file, fsync, rename, fsync the directory).

Entries are written before the hard state, so a persisted commit index never points
past the persisted log (it is clamped on load anyway). The whole log is also kept
in memory; it is small, and snapshots will bound it later.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import crc32c

from pylog.cluster.raft_types import Entry, HardState, Ready

METADATA_DIR = "__cluster_metadata-0"
LOG_FILE = "00000000000000000000.log"
STATE_FILE = "quorum-state"

_HEAD = struct.Struct(">II")  # length, crc
_BODY = struct.Struct(">QQ")  # term, index
_MAX_FRAME = 64 * 1024 * 1024


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


class MetadataLogStore:
    """A ``RaftStorage`` on disk (see the module docstring); single writer, not thread-safe."""

    def __init__(self, data_dir: Path | str, *, fsync: bool = True) -> None:
        self.dir = Path(data_dir) / METADATA_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self.log_path = self.dir / LOG_FILE
        self.state_path = self.dir / STATE_FILE
        self.truncated_bytes = 0  # size of the torn tail removed on open
        buf = self.log_path.read_bytes() if self.log_path.exists() else b""
        self._entries, self._positions, valid = scan_frames(buf)
        self._file = open(self.log_path, "r+b" if self.log_path.exists() else "w+b")  # noqa: SIM115
        if valid < len(buf):
            self.truncated_bytes = len(buf) - valid
            self._file.truncate(valid)
            self._sync_file()
        self._end = valid
        self._hard_state = self._load_state()
        self.extra_state: dict[str, object] = {}

    # ------------------------------------------------------------------ RaftStorage

    def hard_state(self) -> HardState:
        return self._hard_state

    def entries(self) -> Sequence[Entry]:
        return list(self._entries)

    def snapshot(self) -> tuple[int, int]:
        return (0, 0)

    # ------------------------------------------------------------------ writes

    def save(self, ready: Ready) -> None:
        """Persist a Ready's entries (replacing any suffix they conflict with), then its hard state."""
        if ready.entries:
            first = ready.entries[0].index
            if first > len(self._entries) + 1 or first < 1:
                raise ValueError(f"entries start at {first}, log ends at {len(self._entries)}")
            if first <= len(self._entries):
                self._end = self._positions[first - 1]
                del self._entries[first - 1 :]
                del self._positions[first - 1 :]
                self._file.truncate(self._end)
            self._file.seek(self._end)
            chunks = []
            for e in ready.entries:
                frame = encode_frame(e)
                self._positions.append(self._end + sum(len(c) for c in chunks))
                chunks.append(frame)
                self._entries.append(e)
            data = b"".join(chunks)
            self._file.write(data)
            self._end += len(data)
            self._sync_file()
        if ready.hard_state is not None:
            self._write_state(ready.hard_state)

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()

    @property
    def last_index(self) -> int:
        return len(self._entries)

    # ------------------------------------------------------------------ internals

    def _sync_file(self) -> None:
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def _load_state(self) -> HardState:
        last_term = self._entries[-1].term if self._entries else 0
        try:
            raw = json.loads(self.state_path.read_text())
            hs = HardState(int(raw["term"]), raw.get("vote"), int(raw.get("commit", 0)))
        except FileNotFoundError:
            hs = HardState()
        # A lost or stale state file must not leave the term below the log's last term.
        if hs.term < last_term:
            hs = HardState(last_term, None, hs.commit)
        return HardState(hs.term, hs.vote, min(hs.commit, len(self._entries)))

    def _write_state(self, hs: HardState) -> None:
        tmp = self.state_path.with_name(STATE_FILE + ".tmp")
        payload = {"term": hs.term, "vote": hs.vote, "commit": hs.commit, **self.extra_state}
        with open(tmp, "w") as f:
            json.dump(payload, f)
            f.flush()
            if self._fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.state_path)
        if self._fsync:
            fd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._hard_state = hs
