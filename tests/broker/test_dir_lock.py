"""The data directory lock, in one process (brokers of other processes: compat-tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pylog.broker.datapath.dir_lock import LOCK_FILE, DataDirInUseError, lock_data_dir


def test_one_holder_at_a_time_and_release(tmp_path: Path) -> None:
    data = tmp_path / "data"
    lock = lock_data_dir(data)  # creates the directory
    assert (data / LOCK_FILE).read_text().strip() == str(os.getpid())
    pid = os.getpid()
    with pytest.raises(DataDirInUseError, match=rf"in use by another broker in this process \(pid {pid}\)"):
        lock_data_dir(data)
    lock.release()
    lock.release()  # idempotent
    again = lock_data_dir(data)
    again.release()


def test_a_file_is_not_a_data_directory(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        lock_data_dir(path)
