"""Burrow's consumer lag evaluation: a status per partition from a sliding window of offset samples.

Theory of operation. LinkedIn's Burrow judges a consumer without thresholds. For each partition it
keeps the last few commits (offset, time, lag = broker end offset - committed offset at that time)
and the last few broker end offsets, and applies, in order (`evaluate_partition`):

1. Current lag within ``allowed_lag`` (default 0): OK.
2. Now - last commit > last commit - first commit, and no recent broker end offset was at or below
   the last commit (the consumer was not caught up lately): the consumer stopped committing: STOP.
3. The committed offset went backwards and has not come back to where it was: ERR (Burrow's REWIND).
4. A lag within ``allowed_lag`` anywhere in the window: OK.
5. The committed offset never changed: the consumer is stuck: STALL.
6. The offset moves but the lag never decreases between two samples: the consumer is slow: WARN.
7. Otherwise OK.

A group's status (`evaluate_group`) is its worst partition, with STOP / STALL / ERR folded into ERR.

Kafka's OffsetFetch gives no commit times, so `LagWindow` builds the samples from polls: a partition
owned by a live member counts as committing (Kafka clients commit on an interval), so every poll is
a sample; a partition nobody owns only gets a sample when its committed offset moves, so a dead
consumer ages into STOP. Every poll adds a broker end offset. With a single poll only rule 1 can be
decided; the status is then None. Everything here is pure: times are passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import pairwise


class Status(str, Enum):
    OK = "OK"
    WARN = "WARN"
    ERR = "ERR"
    STOP = "STOP"
    STALL = "STALL"

    def __str__(self) -> str:
        return self.value


_GROUP_RANK = {Status.OK: 0, Status.WARN: 1, Status.ERR: 2, Status.STOP: 2, Status.STALL: 2}

REASONS = {
    Status.OK: "caught up in the window, or the lag is going down",
    Status.WARN: "offsets advance but the lag is not going down: the consumer is slower than the producers",
    Status.ERR: "the committed offset went backwards and has not recovered (a rewind)",
    Status.STOP: "no commit for longer than the window spans: the consumer stopped",
    Status.STALL: "the committed offset does not move while there is lag: the consumer is stuck",
}


@dataclass(frozen=True)
class OffsetSample:
    """One commit (or poll standing for one): committed offset, when, and the lag at that time."""

    offset: int
    timestamp_ms: int
    lag: int


def evaluate_partition(samples: Sequence[OffsetSample], current_lag: int, now_ms: int, *,
                       broker_offsets: Sequence[int] = (), allowed_lag: int = 0) -> Status:
    """Burrow's partition rules over `samples` (oldest first) and the recent `broker_offsets` (log end
    offsets seen lately). No samples: OK, as in Burrow."""
    if not samples or current_lag <= allowed_lag:
        return Status.OK
    first, last = samples[0], samples[-1]
    caught_up_lately = any(end <= last.offset for end in broker_offsets)
    if now_ms - last.timestamp_ms > last.timestamp_ms - first.timestamp_ms and not caught_up_lately:
        return Status.STOP
    rewind = next((i for i in range(1, len(samples)) if samples[i].offset < samples[i - 1].offset), None)
    if rewind is not None and not any(s.offset >= samples[rewind - 1].offset for s in samples[rewind:]):
        return Status.ERR
    if any(s.lag <= allowed_lag for s in samples):
        return Status.OK
    if all(b.offset == a.offset for a, b in pairwise(samples)):
        return Status.STALL
    if all(b.lag >= a.lag for a, b in pairwise(samples)):
        return Status.WARN
    return Status.OK


def evaluate_group(statuses: Iterable[Status | None]) -> Status:
    """The worst partition status, folded to OK / WARN / ERR like Burrow's group status."""
    worst = Status.OK
    for s in statuses:
        if s is not None and _GROUP_RANK[s] > _GROUP_RANK[worst]:
            worst = Status.ERR if _GROUP_RANK[s] == 2 else s
    return worst


@dataclass
class _Track:
    samples: deque[OffsetSample]
    broker_offsets: deque[int]
    polls: int = 0


@dataclass
class LagWindow:
    """Per (group, topic, partition) windows of `size` samples fed by polls (see the module doc).
    ``min_distance_ms``: a poll closer than this to the last sample replaces it (Burrow's
    ``min-distance``), so fast refreshes do not shrink the window's time span. ``allowed_lag``: lag
    that still counts as caught up (Burrow's ``allowed-lag``)."""

    size: int = 10
    min_distance_ms: int = 0
    allowed_lag: int = 0
    _tracks: dict[tuple[str, str, int], _Track] = field(default_factory=dict)

    def observe(self, key: tuple[str, str, int], committed: int, log_end: int, now_ms: int, *,
                committing: bool) -> Status | None:
        """Record one poll of a partition and return its status (None: not decidable yet)."""
        lag = max(0, log_end - committed)
        track = self._tracks.get(key)
        if track is None:
            track = self._tracks[key] = _Track(deque(maxlen=self.size), deque(maxlen=self.size))
        track.polls += 1
        track.broker_offsets.append(log_end)
        sample = OffsetSample(committed, now_ms, lag)
        last = track.samples[-1] if track.samples else None
        if last is None or committing or committed != last.offset:
            if last is not None and now_ms - last.timestamp_ms < self.min_distance_ms:
                track.samples.pop()
            track.samples.append(sample)
        if lag <= self.allowed_lag:
            return Status.OK
        if track.polls < 2:
            return None
        return evaluate_partition(list(track.samples), lag, now_ms, broker_offsets=list(track.broker_offsets),
                                  allowed_lag=self.allowed_lag)

    def samples(self, key: tuple[str, str, int]) -> list[OffsetSample]:
        track = self._tracks.get(key)
        return list(track.samples) if track else []

    def complete(self, key: tuple[str, str, int]) -> float:
        """How full the window is (Burrow's ``complete``)."""
        track = self._tracks.get(key)
        return 0.0 if track is None else len(track.samples) / self.size

    def forget_except(self, keys: Iterable[tuple[str, str, int]]) -> None:
        """Drop windows of partitions no longer reported (a deleted group or topic)."""
        keep = set(keys)
        for k in [k for k in self._tracks if k not in keep]:
            del self._tracks[k]
