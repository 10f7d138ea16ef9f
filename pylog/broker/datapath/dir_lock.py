"""One broker per data directory: Kafka's ``.lock`` file, held with an fcntl lock.

A broker takes the lock before it touches anything in its data directory and keeps it until it
stops; the operating system drops it when the process dies, even by ``kill -9``, so a crash never
leaves a stale lock behind. The lock is a POSIX record lock (``fcntl.lockf``), the kind Kafka's own
``FileChannel.tryLock`` takes, so a pylog broker and a Kafka broker also exclude each other. Such
locks belong to a process, so brokers started in one process are kept apart by a registry here.
The holder writes its pid into the file, which lets a refused broker name it.

Readers (``read_topic(data_dir=...)``, Spark's ``dataDir``) never take the lock.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

LOCK_FILE = ".lock"

_held: set[Path] = set()  # data directories locked by brokers of this process
_guard = threading.Lock()


class DataDirInUseError(OSError):
    """Another broker holds the data directory's lock."""


class DataDirLock:
    """The held lock of one data directory; `release` it when the broker stops."""

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd

    def release(self) -> None:
        with _guard:
            if self._fd is None:
                return
            fd, self._fd = self._fd, None
            _held.discard(self.data_dir)
        os.close(fd)  # closing the descriptor drops the fcntl lock


def lock_data_dir(data_dir: Path | str) -> DataDirLock:
    """Create `data_dir` if needed and lock it; raises DataDirInUseError (naming the holder's pid)
    when another broker has it, NotADirectoryError when the path is a file."""
    path = Path(data_dir).resolve()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"data directory {path} is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    with _guard:
        if path in _held:
            raise DataDirInUseError(
                f"data directory {path} is in use by another broker in this process (pid {os.getpid()})"
            )
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirInUseError(
                f"data directory {path} is in use by another broker"
                + (f" (pid {holder})" if holder else "")
                + f"; stop it first, or give this one its own --data-dir (lock file {path / LOCK_FILE})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held.add(path)
    return DataDirLock(path, fd)


def _holder(fd: int) -> str | None:
    """The pid the holder wrote into the lock file, if it did."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if text.isdigit() else None
