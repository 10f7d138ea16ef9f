"""The high watermark a broker publishes beside a partition's segments, for readers of its directory.

Kafka's ``replication-offset-checkpoint`` is written every few seconds, so a reader of the data
directory that trusts it alone misses what was acknowledged since. The broker therefore also keeps
the partition's current high watermark in ``high-watermark``: 16 bytes, the offset written twice
(little-endian int64), through a shared memory map, so that a move of the high watermark costs a
store into the page cache and no system call. It is updated before the produce it completes is
acknowledged, so a reader that opens the directory after an acknowledgement sees at least that
offset. A reader that sees the two copies differ caught a write half done and reads again; a file
that is missing, short or keeps differing is not used (the checkpoint is).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

PUBLISHED_HW_FILE = "high-watermark"
_PAIR = struct.Struct("<qq")
_SINGLE = struct.Struct("<q")
_READ_ATTEMPTS = 8


class PublishedHighWatermark:
    """The writer's side: one shared mapping of the partition's ``high-watermark`` file."""

    def __init__(self, directory: Path) -> None:
        fd = os.open(directory / PUBLISHED_HW_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != _PAIR.size:  # new: "none published" until the first publish
                os.ftruncate(fd, _PAIR.size)
                os.pwrite(fd, _PAIR.pack(-1, -1), 0)
            self._map: mmap.mmap | None = mmap.mmap(fd, _PAIR.size, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self._offset = -1

    def publish(self, offset: int) -> None:
        """Make ``offset`` the high watermark readers see (the first copy, then the second)."""
        if offset == self._offset or self._map is None:
            return
        self._offset = offset
        _SINGLE.pack_into(self._map, 0, offset)
        _SINGLE.pack_into(self._map, _SINGLE.size, offset)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None


def read_published_high_watermark(directory: Path) -> int | None:
    """The high watermark the broker last published for the partition in ``directory``; None when
    it publishes none (an older broker, or a file that never settled)."""
    try:
        with open(directory / PUBLISHED_HW_FILE, "rb") as f:
            for _ in range(_READ_ATTEMPTS):
                f.seek(0)
                raw = f.read(_PAIR.size)
                if len(raw) != _PAIR.size:
                    return None
                first, second = _PAIR.unpack(raw)
                if first == second:
                    return first if first >= 0 else None
    except FileNotFoundError:
        return None
    return None
