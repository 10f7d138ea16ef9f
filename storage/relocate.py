"""Moving a partition directory to another log directory of the same broker (JBOD), crash-safely.

Theory of operation. A move copies the partition into ``<dest>/<topic>-<p>.<id>-future`` (Kafka's
name for a future replica) while the partition keeps serving: ``sync_tree`` passes copy what
changed since the previous pass (new files, other size or mtime, or touched during that pass), so
each pass copies less. The last pass runs with the log paused (``PartitionLog.paused``: no append,
truncation or segment swap can run), and then ``swap_in`` renames, in this order, the source to
``<topic>-<p>.<id>-delete`` and the future to ``<topic>-<p>``, and removes the deleted copy. A crash
at any point leaves one complete copy that ``recover_moves`` finds at the next start:

- a future without its ``-delete`` twin: the move had not finished; the source is current, the
  future is removed;
- a future with its ``-delete`` twin: the source was complete and paused when renamed, so the future
  is too; the move is completed;
- a ``-delete`` directory alone: the move had completed; it is removed.

Temporary files of a running segment rewrite (``*.tmp``) are never copied: a rewrite commits under
the log lock, which the last pass holds.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from .files import fsync_dir
from .partition_dir import list_partitions

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_MOVE_RE = re.compile(r"^(.+-\d+)\.([0-9a-f]{32})(-future|-delete)$")
_COPY_CHUNK = 8 << 20


class MoveCancelled(Exception):
    """The move was called off between two files (a newer request, a deleted partition, a stop)."""


class DuplicatePartitionError(Exception):
    """The same partition lives in two log directories: which copy is current cannot be known."""


class MoveDirs(NamedTuple):
    future: Path
    delete: Path


def move_dirs(source: Path, dest_root: Path, move_id: str) -> MoveDirs:
    """The future directory in ``dest_root`` and the name the source gets once the future is complete."""
    return MoveDirs(dest_root / f"{source.name}.{move_id}{FUTURE_SUFFIX}",
                    source.with_name(f"{source.name}.{move_id}{DELETE_SUFFIX}"))


def sync_tree(src: Path, dst: Path, since_ns: int, cancelled: threading.Event | None = None,
              pace: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Make ``dst`` hold ``src``'s files: copy those missing, changed (size or mtime) or modified
    since ``since_ns``; delete those ``src`` no longer has. Returns the bytes copied and the
    filesystem's time at the start of this pass (the next pass's ``since_ns``): read from the
    filesystem's own clock, it is comparable with the mtimes it stamps however coarse they are (a
    file written in the same tick has an mtime equal to it, and is copied again). A file that
    disappears meanwhile (retention, a swap) is skipped: the next pass sees the result. What it
    copies is on disk when it returns (each file and the directory fsynced). ``pace`` is told the
    bytes of each chunk once copied, and may hold the copy back (a move's throttle)."""
    dst.mkdir(parents=True, exist_ok=True)
    started = _filesystem_now(dst)
    copied = 0
    seen: set[str] = set()
    for entry in os.scandir(src):
        if not entry.is_file(follow_symlinks=False) or entry.name.endswith(".tmp"):
            continue
        if cancelled is not None and cancelled.is_set():
            raise MoveCancelled(str(src))
        seen.add(entry.name)
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        target = dst / entry.name
        try:
            tst = target.stat()
            same = tst.st_size == st.st_size and tst.st_mtime_ns == st.st_mtime_ns
        except FileNotFoundError:
            same = False
        if same and st.st_mtime_ns < since_ns:
            continue
        try:
            copied += _copy_file(Path(entry.path), target, cancelled, pace)
        except FileNotFoundError:
            seen.discard(entry.name)
    for entry in os.scandir(dst):
        if entry.name not in seen:
            os.unlink(entry.path)
    fsync_dir(dst)
    return copied, started


def _filesystem_now(directory: Path) -> int:
    """The filesystem's clock (what it stamps mtimes with), read by touching a file."""
    mark = directory / ".pass.tmp"
    mark.touch()
    try:
        return mark.stat().st_mtime_ns
    finally:
        mark.unlink()


def _copy_file(src: Path, dst: Path, cancelled: threading.Event | None,
               pace: Callable[[int], None] | None = None) -> int:
    """Copy in the kernel (copy_file_range: no bytes through Python, the GIL released per chunk),
    chunk by chunk so that a cancelled move stops soon; plain reads and writes where the
    filesystem does not support it."""
    tmp = dst.with_name(dst.name + ".copy.tmp")
    n = 0
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        st = os.fstat(fin.fileno())
        fast = hasattr(os, "copy_file_range")
        while n < st.st_size:
            if cancelled is not None and cancelled.is_set():
                raise MoveCancelled(str(src))
            if fast:
                try:
                    done = os.copy_file_range(fin.fileno(), fout.fileno(), _COPY_CHUNK, n, n)
                except OSError:
                    fast = False
                    continue
            else:
                chunk = os.pread(fin.fileno(), min(_COPY_CHUNK, st.st_size - n), n)
                done = os.pwrite(fout.fileno(), chunk, n) if chunk else 0
            if done == 0:  # the file shrank meanwhile (replaced files are new files; see the next pass)
                break
            n += done
            if pace is not None:
                pace(done)
            os.fdatasync(fout.fileno())  # written back chunk by chunk: no burst of dirty pages that
            # would hold the broker's own writes back (the kernel throttles writers past a limit)
        os.fsync(fout.fileno())
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, dst)
    return n


def tree_size(path: Path) -> int:
    """The bytes of the files directly in ``path`` (0 when it is gone)."""
    try:
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return 0


def swap_in(source: Path, dirs: MoveDirs) -> Path:
    """Make the complete future the partition's directory (see the module docstring for the order);
    returns its final path."""
    final = dirs.future.with_name(source.name)
    os.replace(source, dirs.delete)
    fsync_dir(source.parent)
    os.replace(dirs.future, final)
    fsync_dir(final.parent)
    shutil.rmtree(dirs.delete, ignore_errors=True)
    return final


def recover_moves(roots: Iterable[Path]) -> list[str]:
    """Finish or undo moves a crash interrupted (module docstring); returns what was done, to log."""
    roots = list(roots)
    futures: dict[tuple[str, str], Path] = {}
    deletes: dict[tuple[str, str], Path] = {}
    for root in roots:
        for entry in os.scandir(root):
            m = _MOVE_RE.match(entry.name)
            if m and entry.is_dir():
                key = (m.group(1), m.group(2))
                (futures if m.group(3) == FUTURE_SUFFIX else deletes)[key] = Path(entry.path)
    done = []
    for key, future in futures.items():
        deleted = deletes.pop(key, None)
        if deleted is None:
            shutil.rmtree(future, ignore_errors=True)
            done.append(f"removed the unfinished copy {future}")
        else:
            os.replace(future, future.with_name(key[0]))
            fsync_dir(future.parent)
            shutil.rmtree(deleted, ignore_errors=True)
            done.append(f"completed the move of {key[0]} to {future.parent}")
    for deleted in deletes.values():
        shutil.rmtree(deleted, ignore_errors=True)
        done.append(f"removed the moved-away copy {deleted}")
    return done


def find_partition_dirs(roots: Iterable[Path]) -> dict[tuple[str, int], Path]:
    """Every ``<topic>-<partition>`` directory of ``roots``; a partition found in two roots raises
    DuplicatePartitionError."""
    found: dict[tuple[str, int], Path] = {}
    for root in roots:
        for d in list_partitions(root):
            tp = (d.topic, d.partition)
            other = found.get(tp)
            if other is not None:
                raise DuplicatePartitionError(
                    f"partition {d.topic}-{d.partition} is in two log directories, {other} and {d.path}; "
                    "keep the current copy and delete the other before starting"
                )
            found[tp] = d.path
    return found
