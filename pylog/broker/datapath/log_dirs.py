"""The broker's log directories (``log.dirs``, JBOD): which exist, which partition lives where, and
where a new one goes.

``log.dirs`` is a comma-separated list (``log.dir`` when it is not set); the first directory is the
node's data directory (``meta.properties``, the metadata log, the lock), every other one holds
partitions only, with its own ``.lock`` and ``meta.properties`` (its directory id, KIP-858). Each
is checked at start, with a plain error for a bad one. A new partition goes to the directory
holding the fewest partitions (future replicas of moves included), as Kafka's LogManager places
them, unless AlterReplicaLogDirs named one for it first (Kafka's preferred log dir).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pylog.config import BrokerConfig, ConfigError

TopicPartition = tuple[str, int]


def split_log_dirs(value: str) -> list[str]:
    """The entries of a ``log.dirs`` value; an empty entry is a configuration error."""
    entries = [e.strip() for e in value.split(",")]
    if not entries or any(not e for e in entries):
        raise ConfigError(f"log.dirs={value!r} has an empty entry (a comma-separated list of directories)")
    return entries


def configured_log_dirs(config: BrokerConfig, data_dir: Path | str | None = None) -> list[Path]:
    """The log directories, absolute, in order: those of ``log.dirs`` (else ``log.dir``). A
    ``data_dir`` given on the command line is the node's data directory, so it comes first: moved
    there when ``log.dirs`` names it, else in place of the first (``--data-dir`` overrides the
    data directory, not the other disks). Naming one twice in ``log.dirs`` is an error, as in
    Kafka."""
    raw = config.raw("log.dirs")
    if raw is not None:
        entries = split_log_dirs(raw)
    elif data_dir is not None:
        entries = []
    else:
        entries = [config.raw("log.dir") or "./pylog-data"]
    seen: dict[Path, str] = {}
    for e in entries:
        p = Path(e).expanduser().resolve()
        if p in seen:
            raise ConfigError(f"log.dirs names {p} twice ({seen[p]!r} and {e!r})")
        seen[p] = e
    dirs = list(seen)
    if data_dir is not None:
        first = Path(data_dir).expanduser().resolve()
        rest = [d for d in dirs if d != first] if first in dirs else dirs[1:]
        dirs = [first, *rest]
    return dirs


def first_log_dir(config: BrokerConfig) -> Path:
    """The node's data directory when none is given on the command line: the first log dir."""
    return configured_log_dirs(config)[0]


def check_log_dirs(dirs: Sequence[Path]) -> None:
    """Create missing log directories and refuse, with a plain message, one that is not a writable
    directory or that lies inside another (its partitions would be found twice)."""
    for d in dirs:
        if d.exists() and not d.is_dir():
            raise ConfigError(f"log directory {d} is not a directory")
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"log directory {d} cannot be created: {exc.strerror or exc}") from None
        if not os.access(d, os.W_OK | os.X_OK):
            raise ConfigError(f"log directory {d} is not writable")
    for a in dirs:
        for b in dirs:
            if a != b and a in b.parents:
                raise ConfigError(f"log directory {b} is inside log directory {a}")


def least_loaded(dirs: Sequence[Path], counts: Mapping[Path, int]) -> Path:
    """The directory with the fewest partitions (ties: the first configured), Kafka's rule for a new
    partition's log."""
    if not dirs:
        raise ValueError("no log directory")
    return min(enumerate(dirs), key=lambda item: (counts.get(item[1], 0), item[0]))[1]


@dataclass(frozen=True)
class DirUsage:
    """A log directory's volume, as DescribeLogDirs v4 reports it (-1: unknown)."""

    total_bytes: int = -1
    usable_bytes: int = -1
    error: str | None = None


def dir_usage(path: Path) -> DirUsage:
    try:
        usage = shutil.disk_usage(path)
    except OSError as exc:
        return DirUsage(error=str(exc))
    if not path.is_dir():
        return DirUsage(error=f"{path} is gone")
    return DirUsage(usage.total, usage.free)


@dataclass
class LogDirs:
    """The broker's log directories in configured order, and the directory each of them assigns."""

    dirs: list[Path]
    directory_ids: dict[Path, uuid.UUID] = field(default_factory=dict)
    # AlterReplicaLogDirs for a partition not hosted yet: where it will be created
    preferred: dict[TopicPartition, Path] = field(default_factory=dict)
    # partitions found on disk at start, by directory
    found: dict[TopicPartition, Path] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.dirs[0]

    def resolve(self, path: str) -> Path | None:
        """The configured directory ``path`` names (absolute, as Kafka's clients send it), or None."""
        try:
            p = Path(path).expanduser().resolve()
        except (OSError, RuntimeError, ValueError):
            return None
        return p if p in self.dirs else None

    def place(self, tp: TopicPartition, counts: Mapping[Path, int]) -> Path:
        """The directory of ``tp``'s log: where it already is, where it was asked to go, else the
        least-loaded one."""
        found = self.found.pop(tp, None)
        if found is not None:
            return found.parent
        preferred = self.preferred.pop(tp, None)
        if preferred is not None and preferred in self.dirs:
            return preferred
        return least_loaded(self.dirs, counts)


def count_by_dir(paths: Iterable[Path]) -> dict[Path, int]:
    """How many partition directories each log directory holds (``paths``: partition directories)."""
    out: dict[Path, int] = {}
    for p in paths:
        out[p.parent] = out.get(p.parent, 0) + 1
    return out
