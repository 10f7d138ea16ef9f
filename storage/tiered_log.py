"""A partition read across both tiers: remote segments, then the local log from where they end.

The remote tier covers ``[remote start, remote end]`` (one pinned manifest or the metadata image);
the local log serves every offset after it. Local segments the remote tier also holds are never
read twice: the boundary is the remote end, not the local log start, so the merge has neither gap
nor duplicate while the two overlap (a segment uploaded but not yet past local retention).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
import pyarrow as pa

from pylog.model import RECORD_SCHEMA

from .errors import OffsetOutOfRange
from .schema import StoredBatch


class ReadableLog(Protocol):
    """The reading subset of ``PartitionLog`` that ``RemoteLog`` and ``TieredLog`` share."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def local_log_start_offset(self) -> int: ...

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one: bool = True) -> list[StoredBatch]: ...

    def batch_metadata(self, start_offset: int | None = None, end_offset: int | None = None, *,
                       attributes: int = 0) -> np.ndarray: ...

    def scan(self, start_offset: int | None = None, end_offset: int | None = None, *,
             views: bool = False) -> Iterator[pa.RecordBatch]: ...

    def offset_for_timestamp(self, timestamp_ms: int, *,
                             max_offset: int | None = None) -> tuple[int, int] | None: ...

    def max_timestamp_and_offset(self) -> tuple[int, int] | None: ...

    def close(self) -> None: ...


class TieredLog:
    """``remote`` for offsets below its end, ``local`` (None: store only) from there on."""

    def __init__(self, remote: ReadableLog, local: ReadableLog | None) -> None:
        self.remote = remote
        self.local = local
        self.boundary = remote.log_end_offset if remote.log_end_offset > remote.log_start_offset else None

    @property
    def log_start_offset(self) -> int:
        if self.boundary is not None or self.local is None:
            return self.remote.log_start_offset
        return self.local.local_log_start_offset

    @property
    def log_end_offset(self) -> int:
        if self.local is None:
            return self.remote.log_end_offset
        return max(self.local.log_end_offset, self.boundary or 0)

    @property
    def local_log_start_offset(self) -> int:
        return self.local_start

    @property
    def local_start(self) -> int:
        """The first offset read from the local log."""
        if self.local is None:
            return self.log_end_offset
        return max(self.local.local_log_start_offset, self.boundary or 0)

    def _split(self, start: int | None, end: int | None) -> tuple[int, int, int]:
        s = self.log_start_offset if start is None else max(start, self.log_start_offset)
        e = self.log_end_offset if end is None else min(end, self.log_end_offset)
        return s, e, self.local_start

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one: bool = True) -> list[StoredBatch]:
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRange(start_offset, self.log_start_offset, self.log_end_offset)
        if self.boundary is not None and start_offset < self.boundary:
            limit = self.boundary if max_offset is None else min(max_offset, self.boundary)
            out = self.remote.read(start_offset, max_bytes, max_offset=limit, min_one=min_one)
            if out or self.local is None:
                return out
        if self.local is None:
            return []
        return self.local.read(max(start_offset, self.local_start), max_bytes, max_offset=max_offset,
                               min_one=min_one)

    def batch_metadata(self, start_offset: int | None = None, end_offset: int | None = None, *,
                       attributes: int = 0) -> np.ndarray:
        s, e, cut = self._split(start_offset, end_offset)
        parts = []
        if s < min(e, cut):
            parts.append(self.remote.batch_metadata(s, min(e, cut), attributes=attributes))
        if self.local is not None and max(s, cut) < e:
            local = self.local.batch_metadata(max(s, cut), e, attributes=attributes)
            if parts and len(local) and len(parts[0]):  # a batch straddling the boundary comes once
                local = local[local["base_offset"] > int(parts[0]["base_offset"][-1])]
            parts.append(local)
        return np.concatenate(parts) if len(parts) > 1 else parts[0] if parts else \
            self.remote.batch_metadata(0, 0)

    def scan(self, start_offset: int | None = None, end_offset: int | None = None, *,
             views: bool = False) -> Iterator[pa.RecordBatch]:
        s, e, cut = self._split(start_offset, end_offset)
        if s < min(e, cut):
            yield from self.remote.scan(s, min(e, cut), views=views)
        if self.local is not None and max(s, cut) < e:
            yield from self.local.scan(max(s, cut), e, views=views)

    def read_table(self, start_offset: int | None = None, end_offset: int | None = None) -> pa.Table:
        return pa.Table.from_batches(list(self.scan(start_offset, end_offset)), schema=RECORD_SCHEMA)

    def offset_for_timestamp(self, timestamp_ms: int, *,
                             max_offset: int | None = None) -> tuple[int, int] | None:
        cut = self.local_start
        if self.boundary is not None:
            found = self.remote.offset_for_timestamp(
                timestamp_ms, max_offset=cut if max_offset is None else min(cut, max_offset))
            if found is not None:
                return found
            if max_offset is not None and max_offset <= cut:
                return None
        if self.local is None:
            return None
        return self.local.offset_for_timestamp(timestamp_ms, max_offset=max_offset)

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        found = [f for f in ((self.remote.max_timestamp_and_offset() if self.boundary is not None else None),
                             (self.local.max_timestamp_and_offset() if self.local is not None else None))
                 if f is not None]
        if not found:
            return None
        best = max(ts for ts, _ in found)
        return next(f for f in found if f[0] == best)  # the remote one first: its offset is smaller

    def close(self) -> None:
        self.remote.close()
        if self.local is not None:
            self.local.close()
