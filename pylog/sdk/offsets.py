"""Offset and timestamp specifications in the forms Spark's Kafka source accepts, resolved to ranges.

Forms: ``"earliest"``, ``"latest"``, a JSON string or dict ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest,
-1 latest; a dict keyed by partition alone is accepted too), timestamps as epoch milliseconds, a
``datetime`` or the same per-partition JSON. Ranges are half-open: ``[start, end)``, like Spark's
``endingOffsets``. Partitions a JSON spec does not name take the default (earliest / latest).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union

# the SDK raises the client's: one class for a missing topic
from pylog.client.errors import UnknownTopicError as UnknownTopicError

if TYPE_CHECKING:
    import pyarrow as pa

EARLIEST = -2
LATEST = -1

OffsetSpec = Union[str, Mapping[Any, Any], None]  # noqa: UP007
TimestampSpec = Union[int, dt.datetime, str, Mapping[Any, Any], None]  # noqa: UP007


class OffsetOutOfRangeError(ValueError):
    """A requested offset lies outside the partition's ``[log start, high watermark]``."""


@dataclass(frozen=True)
class PartitionRange:
    """Records ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return max(0, self.end - self.start)


class OffsetSource(Protocol):
    """What resolving a spec needs from a source (the data directory or a Kafka cluster)."""

    def partitions(self, topic: str) -> list[int]: ...

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """{partition: (log start offset, readable end)} where the end is the high watermark / last
        stable offset: the first offset a committed reader may not see yet."""
        ...

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        """{partition: first offset whose timestamp >= ts, or None when there is none}."""
        ...


class TopicSource(OffsetSource, Protocol):
    """A source a scan reads: its offsets, and the records of given ranges as Arrow batches."""

    def read(self, ranges: list[PartitionRange], columns: Sequence[str]
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]: ...

    def close(self) -> None: ...


def parse_offsets(spec: OffsetSpec, topic: str, *, name: str) -> int | dict[int, int]:
    """A user offset spec -> EARLIEST / LATEST for every partition, or {partition: offset}."""
    if spec is None:
        raise ValueError(f"{name} must not be None")
    if isinstance(spec, str):
        text = spec.strip()
        if text.lower() == "earliest":
            return EARLIEST
        if text.lower() == "latest":
            return LATEST
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: expected 'earliest', 'latest' or JSON like "
                             f'{{"{topic}": {{"0": 23, "1": -2}}}}, got {text!r} ({exc.msg})') from None
    if isinstance(spec, bool) or not isinstance(spec, (Mapping, int)):
        raise ValueError(f"{name}: expected 'earliest', 'latest' or a per-partition mapping, got {spec!r}")
    if isinstance(spec, int):
        if spec in (EARLIEST, LATEST):
            return spec
        raise ValueError(f"{name}: a bare integer must be -2 (earliest) or -1 (latest), got {spec}")
    return _per_partition(spec, topic, name=name, what="offset")


def _per_partition(spec: Mapping[Any, Any], topic: str, *, name: str, what: str) -> dict[int, int]:
    if spec and all(_is_partition_key(k) for k in spec):
        inner: Mapping[Any, Any] = spec
    else:
        unknown = [k for k in spec if k != topic]
        if unknown:
            raise ValueError(f"{name}: names topic(s) {unknown!r}, but the read is of topic {topic!r}")
        inner = spec.get(topic, {})
        if not isinstance(inner, Mapping):
            raise ValueError(f"{name}: expected {{partition: {what}}} under {topic!r}, got {inner!r}")
    out: dict[int, int] = {}
    for k, v in inner.items():
        if not _is_partition_key(k):
            raise ValueError(f"{name}: partition keys are integers, got {k!r}")
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{name}: {what} for partition {k} must be an integer, got {v!r}")
        out[int(k)] = v
    return out


def _is_partition_key(k: Any) -> bool:
    if isinstance(k, bool):
        return False
    if isinstance(k, int):
        return k >= 0
    return isinstance(k, str) and k.isdigit()


def parse_timestamps(spec: TimestampSpec, topic: str, *, name: str) -> int | dict[int, int] | None:
    """A timestamp spec -> epoch ms for every partition, {partition: ms}, or None."""
    if spec is None:
        return None
    if isinstance(spec, dt.datetime):
        if spec.tzinfo is None:
            spec = spec.replace(tzinfo=dt.timezone.utc)
        return int(spec.timestamp() * 1000)
    if isinstance(spec, str):
        text = spec.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            try:
                return parse_timestamps(dt.datetime.fromisoformat(text), topic, name=name)
            except ValueError:
                raise ValueError(f"{name}: expected epoch milliseconds, an ISO date-time or JSON "
                                 f'like {{"{topic}": {{"0": 1700000000000}}}}, got {text!r}') from None
        return parse_timestamps(parsed, topic, name=name)
    if isinstance(spec, bool):
        raise ValueError(f"{name}: expected a timestamp, got {spec!r}")
    if isinstance(spec, int):
        return spec
    if isinstance(spec, Mapping):
        return _per_partition(spec, topic, name=name, what="timestamp")
    raise ValueError(f"{name}: expected epoch milliseconds, a datetime or a per-partition mapping, "
                     f"got {spec!r}")


def resolve_ranges(
    source: OffsetSource,
    topic: str,
    *,
    partitions: list[int] | None = None,
    starting_offsets: OffsetSpec = "earliest",
    ending_offsets: OffsetSpec = "latest",
    starting_timestamp: TimestampSpec = None,
    ending_timestamp: TimestampSpec = None,
) -> list[PartitionRange]:
    """Turn the user's read bounds into concrete ``[start, end)`` per partition.

    Timestamps win over offsets (as in Spark). A starting timestamp with no later record starts at the
    end (nothing to read); an ending timestamp with no later record ends at the latest offset.
    """
    start_spec = parse_offsets(starting_offsets, topic, name="starting_offsets")
    end_spec = parse_offsets(ending_offsets, topic, name="ending_offsets")
    start_ts = parse_timestamps(starting_timestamp, topic, name="starting_timestamp")
    end_ts = parse_timestamps(ending_timestamp, topic, name="ending_timestamp")
    existing = source.partitions(topic)
    if partitions is None:
        chosen = existing
    else:
        chosen = sorted({int(p) for p in partitions})
        missing = [p for p in chosen if p not in existing]
        if missing:
            raise UnknownTopicError(f"topic {topic!r} has partitions {existing}, not {missing}")
    for spec_name, spec in (("starting_offsets", start_spec), ("ending_offsets", end_spec),
                            ("starting_timestamp", start_ts), ("ending_timestamp", end_ts)):
        if isinstance(spec, dict):
            extra = sorted(set(spec) - set(existing))
            if extra:
                raise UnknownTopicError(f"{spec_name} names partition(s) {extra} of topic {topic!r}, "
                                        f"which has partitions {existing}")
    if not chosen:
        return []
    bounds = source.offset_bounds(topic, chosen)
    starts = _pick(start_spec, chosen, EARLIEST)
    ends = _pick(end_spec, chosen, LATEST)
    if start_ts is not None:
        found = source.offsets_for_times(topic, _times(start_ts, chosen))
        for p, off in found.items():
            starts[p] = LATEST if off is None else off
    if end_ts is not None:
        found = source.offsets_for_times(topic, _times(end_ts, chosen))
        for p, off in found.items():
            ends[p] = LATEST if off is None else off
    ranges = []
    for p in chosen:
        lo, hi = bounds[p]
        start = _absolute(starts[p], lo, hi)
        end = _absolute(ends[p], lo, hi)
        for label, off in (("starting", start), ("ending", end)):
            if not lo <= off <= hi:
                raise OffsetOutOfRangeError(
                    f"{label} offset {off} of {topic}-{p} is out of range: the partition holds "
                    f"offsets [{lo}, {hi}) (earliest {lo}, latest {hi})")
        if start > end:
            raise OffsetOutOfRangeError(f"{topic}-{p}: starting offset {start} is after ending offset {end}")
        ranges.append(PartitionRange(topic, p, start, end))
    return ranges


def _pick(spec: int | dict[int, int], partitions: list[int], default: int) -> dict[int, int]:
    if isinstance(spec, int):
        return dict.fromkeys(partitions, spec)
    return {p: spec.get(p, default) for p in partitions}


def _times(spec: int | dict[int, int], partitions: list[int]) -> dict[int, int]:
    if isinstance(spec, int):
        return dict.fromkeys(partitions, spec)
    return {p: spec[p] for p in partitions if p in spec}


def _absolute(offset: int, lo: int, hi: int) -> int:
    if offset == EARLIEST:
        return lo
    if offset == LATEST:
        return hi
    if offset < 0:
        raise OffsetOutOfRangeError(f"offset {offset}: only -2 (earliest) and -1 (latest) may be negative")
    return offset
