"""pylog.storage: the partition log, Arrow IPC segments with offset / time indexes (see FORMAT.md)."""

from pylog.model import RECORD_SCHEMA

from .checkpoint import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from .compaction import CompactionResult
from .config import LogConfig
from .errors import (
    CorruptSegment,
    InvalidAppend,
    InvalidRecord,
    OffsetOutOfRange,
    ReadOnlyLog,
    StorageError,
)
from .log import PartitionLog, read_segments
from .partition_dir import PartitionDir, list_partitions
from .schema import BatchMeta, StoredBatch
from .segment import MAPPED_SEGMENTS, Stats

__all__ = [
    "MAPPED_SEGMENTS",
    "RECORD_SCHEMA",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "BatchMeta",
    "CompactionResult",
    "CorruptSegment",
    "InvalidAppend",
    "InvalidRecord",
    "LeaderEpochCache",
    "LogConfig",
    "OffsetOutOfRange",
    "PartitionDir",
    "PartitionLog",
    "ReadOnlyLog",
    "Stats",
    "StorageError",
    "StoredBatch",
    "list_partitions",
    "read_segments",
]
