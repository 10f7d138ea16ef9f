"""Exceptions of the partition log; the broker maps each to a Kafka error code (named in the docstring)."""

from __future__ import annotations


class StorageError(Exception):
    """Base class (KAFKA_STORAGE_ERROR when nothing more specific applies)."""


class OffsetOutOfRange(StorageError):
    """A read or lookup below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidAppend(StorageError):
    """A batch that cannot be appended as given: empty, wrong schema, offsets below the log end
    offset, inconsistent metadata (CORRUPT_MESSAGE / INVALID_RECORD)."""


class InvalidRecord(InvalidAppend):
    """A record the topic does not accept, e.g. a null key in a compacted topic (INVALID_RECORD)."""


class CorruptSegment(StorageError):
    """A sealed segment that does not match its indexes and cannot be rebuilt (KAFKA_STORAGE_ERROR)."""


class ReadOnlyLog(StorageError):
    """A write on a log opened with `open_readonly`."""


class SegmentReplaced(FileNotFoundError):
    """A read-only view's segment file was replaced or cut short by the writer (sealed, compacted
    or deleted) after the view was opened: reopen the log and read again."""
