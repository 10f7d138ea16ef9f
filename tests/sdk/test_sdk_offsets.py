"""Spark-style offset and timestamp specs resolved against a source."""

from __future__ import annotations

import datetime as dt

import pytest

from pylog.sdk.offsets import (
    EARLIEST,
    LATEST,
    OffsetOutOfRangeError,
    PartitionRange,
    UnknownTopicError,
    parse_offsets,
    parse_timestamps,
    resolve_ranges,
)


class FakeSource:
    """Partition p holds offsets [10 * p, 100 + 10 * p); record o has timestamp 1000 + o."""

    def partitions(self, topic: str) -> list[int]:
        if topic != "t":
            raise UnknownTopicError(topic)
        return [0, 1, 2]

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return {p: (10 * p, 100 + 10 * p) for p in partitions}

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        for p, ts in times.items():
            lo, hi = 10 * p, 100 + 10 * p
            off = max(lo, ts - 1000)
            out[p] = off if off < hi else None
        return out


def spans(ranges: list[PartitionRange]) -> list[tuple[int, int, int]]:
    return [(r.partition, r.start, r.end) for r in ranges]


def test_parse_forms() -> None:
    assert parse_offsets("earliest", "t", name="s") == EARLIEST
    assert parse_offsets(" LATEST ", "t", name="s") == LATEST
    assert parse_offsets('{"t": {"0": 23, "1": -2}}', "t", name="s") == {0: 23, 1: -2}
    assert parse_offsets({"t": {0: 5}}, "t", name="s") == {0: 5}
    assert parse_offsets({"2": -1}, "t", name="s") == {2: -1}
    assert parse_timestamps(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "t", name="s") == 1704067200000
    assert parse_timestamps("2024-01-01T00:00:00", "t", name="s") == 1704067200000
    assert parse_timestamps('{"t": {"1": 5}}', "t", name="s") == {1: 5}
    assert parse_timestamps("1700000000000", "t", name="s") == 1700000000000


@pytest.mark.parametrize("bad", ["{oops", "[1, 2]", '{"t": {"0": "x"}}', '{"t": {"a": 1}}', '{"t": 3}', "7"])
def test_bad_offsets_json(bad: str) -> None:
    with pytest.raises(ValueError, match="starting_offsets"):
        parse_offsets(bad, "t", name="starting_offsets")


def test_resolve_defaults_and_json() -> None:
    src = FakeSource()
    assert spans(resolve_ranges(src, "t")) == [(0, 0, 100), (1, 10, 110), (2, 20, 120)]
    got = resolve_ranges(src, "t", starting_offsets={"t": {"0": 50, "1": -1}},
                         ending_offsets='{"t": {"2": 30}}')
    assert spans(got) == [(0, 50, 100), (1, 110, 110), (2, 20, 30)]
    assert spans(resolve_ranges(src, "t", partitions=[2])) == [(2, 20, 120)]


def test_resolve_timestamps_take_precedence() -> None:
    src = FakeSource()
    got = resolve_ranges(src, "t", starting_offsets="latest", starting_timestamp=1050, ending_timestamp=5000)
    assert spans(got) == [(0, 50, 100), (1, 50, 110), (2, 50, 120)]
    got = resolve_ranges(src, "t", starting_timestamp={"1": 1015})
    assert spans(got) == [(0, 0, 100), (1, 15, 110), (2, 20, 120)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"starting_offsets": {"0": 101}}, "starting offset 101 of t-0 is out of range"),
        ({"starting_offsets": {"1": 3}}, "out of range"),
        ({"ending_offsets": {"0": -3}}, "only -2"),
        ({"starting_offsets": {"0": 60}, "ending_offsets": {"0": 40}}, "after ending offset"),
    ],
)
def test_out_of_range(kwargs: dict, message: str) -> None:
    with pytest.raises(OffsetOutOfRangeError, match=message):
        resolve_ranges(FakeSource(), "t", **kwargs)


def test_unknown_partitions_and_topics() -> None:
    with pytest.raises(UnknownTopicError):
        resolve_ranges(FakeSource(), "nope")
    with pytest.raises(UnknownTopicError, match=r"not \[5\]"):
        resolve_ranges(FakeSource(), "t", partitions=[5])
    with pytest.raises(UnknownTopicError, match="names partition"):
        resolve_ranges(FakeSource(), "t", starting_offsets={"t": {"9": 0}})
    with pytest.raises(ValueError, match="names topic"):
        resolve_ranges(FakeSource(), "t", ending_offsets={"u": {"0": 1}})
