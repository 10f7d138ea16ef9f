"""The remote tier's decisions, as pure functions of what a broker knows (no I/O, no clock).

Theory of operation
-------------------
A partition leader copies its sealed local segments to the store in offset order, continuing
after the last committed remote end offset, so a new leader picks up where the old one stopped:
no gap, no offset copied twice. A segment is copied only once it is sealed and wholly below
both the high watermark and the last stable offset (nothing in it can still be truncated or
aborted). Replicas roll segments independently, so a new leader's next segment may begin below
the remote end; its copy then starts at the remote end (``RemoteLogSegment.base_offset`` is the
first offset it serves, on a batch boundary every replica shares).

A local segment leaves the disk (leader or follower alike) only when committed remote segments
cover it, a manifest listing them exists, and it is past local retention (``local.retention.ms``
or ``local.retention.bytes``, -2 meaning retention.ms / retention.bytes), oldest first, never the
active one. Remote segments expire oldest first by retention.ms (their largest timestamp), by
retention.bytes (remote bytes plus the local bytes not yet remote) or when DeleteRecords moved
the log start offset past them. Objects the metadata no longer names (a deposed leader's late
upload, a deleted topic's directory), deleted segments' objects and superseded manifests are
removed only after ``remote.log.reader.grace.ms`` since they were first seen in that condition,
so a reader that planned with an older manifest never meets a missing object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pylog.storage.remote_layout import RemoteLogSegment

COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class LocalSegment:
    """A local segment as the rules see it: offsets ``[base_offset, next_offset)``."""

    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int
    sealed: bool


@dataclass(frozen=True, slots=True)
class RemoteEntry:
    """A remote segment in some KIP-405 state (what the image holds)."""

    segment: RemoteLogSegment
    state: int


@dataclass(frozen=True, slots=True)
class CopyCandidate:
    """Copy ``local``'s files as remote offsets ``[base_offset, end_offset]`` (end inclusive)."""

    local: LocalSegment
    base_offset: int
    end_offset: int


def committed(entries: Iterable[RemoteEntry]) -> list[RemoteLogSegment]:
    done = [e.segment for e in entries if e.state == COPY_SEGMENT_FINISHED]
    return sorted(done, key=lambda s: s.base_offset)


def remote_end(entries: Iterable[RemoteEntry]) -> int:
    """The last offset committed remotely; -1 when nothing is."""
    segs = committed(entries)
    return max((s.end_offset for s in segs), default=-1)


def next_copies(local: Sequence[LocalSegment], entries: Iterable[RemoteEntry], *, high_watermark: int,
                last_stable_offset: int, log_start_offset: int, limit: int = 1 << 30) -> list[CopyCandidate]:
    """The segments to copy next, in offset order (at most ``limit``); ``local`` is oldest first,
    the active segment last."""
    copy_from = max(remote_end(entries) + 1, log_start_offset)
    bound = min(high_watermark, last_stable_offset)
    out: list[CopyCandidate] = []
    for seg in local[:-1]:
        if len(out) >= limit:
            break
        if seg.next_offset <= copy_from or seg.next_offset == seg.base_offset:
            continue  # already remote (or empty)
        if not seg.sealed or seg.next_offset > bound:
            break  # offset order: nothing after a segment that cannot go yet
        out.append(CopyCandidate(seg, max(seg.base_offset, copy_from), seg.next_offset - 1))
        copy_from = seg.next_offset
    return out


def stale_copies(entries: Iterable[RemoteEntry], in_flight: Iterable[str]) -> list[RemoteLogSegment]:
    """COPY_SEGMENT_STARTED segments no upload of this leader is finishing (a deposed or crashed
    leader's): they are deleted, never finished."""
    mine = set(in_flight)
    return [e.segment for e in entries
            if e.state == COPY_SEGMENT_STARTED and e.segment.segment_id not in mine]


def local_retention(retention: int, local: int) -> int:
    """The effective local retention (-2: the same as the total one)."""
    return retention if local == -2 else local


def deletable_local(local: Sequence[LocalSegment], *, manifested_end: int, log_start_offset: int, now_ms: int,
                    local_retention_ms: int, local_retention_bytes: int) -> int:
    """How many of the oldest local segments may be deleted (never the active one).

    ``manifested_end``: the last offset covered by committed remote segments that a manifest in
    the store lists (-1: none). Retention values are the effective ones (-1: unbounded)."""
    total = sum(s.size_bytes for s in local)
    n = 0
    for seg in local[:-1]:
        below_start = seg.next_offset <= log_start_offset
        covered = seg.next_offset - 1 <= manifested_end
        if not (below_start or covered):
            break
        old = local_retention_ms >= 0 and now_ms - seg.max_timestamp > local_retention_ms
        big = local_retention_bytes >= 0 and total - seg.size_bytes >= local_retention_bytes
        past = below_start or old or big
        if not past:
            break
        total -= seg.size_bytes
        n += 1
    return n


def expired_remote(
    segments: Sequence[RemoteLogSegment], *, now_ms: int, retention_ms: int, retention_bytes: int,
    local_only_bytes: int, log_start_offset: int,
) -> list[RemoteLogSegment]:
    """Committed remote segments (by base offset) that retention or DeleteRecords removes, oldest
    first. ``local_only_bytes``: local bytes not yet remote (they count toward retention.bytes)."""
    total = sum(s.size_bytes for s in segments) + local_only_bytes
    out = []
    for seg in segments:
        gone = seg.end_offset < log_start_offset or (
            retention_ms >= 0 and now_ms - seg.max_timestamp > retention_ms) or (
            retention_bytes >= 0 and total - seg.size_bytes >= retention_bytes)
        if not gone:
            break
        total -= seg.size_bytes
        out.append(seg)
    return out


def log_start_after(segments: Sequence[RemoteLogSegment], expired: Sequence[RemoteLogSegment],
                    log_start_offset: int, local_log_start_offset: int) -> int:
    """The log start offset once ``expired`` are gone: the first remaining remote offset, or the
    local start when nothing remote remains; never lower than it was."""
    gone = {s.segment_id for s in expired}
    left = [s for s in segments if s.segment_id not in gone]
    start = left[0].base_offset if left else local_log_start_offset
    return max(start, log_start_offset) if expired else log_start_offset


def stem_segment_id(name: str) -> str | None:
    """The segment id in an object name ``<base 20d>-<epoch>-<id>.<ext>`` (None: not a segment's)."""
    stem = name.rsplit("/", 1)[-1].split(".", 1)[0]
    parts = stem.split("-")
    if len(parts) != 3 or not parts[0].isdigit() or len(parts[0]) != 20:
        return None
    return parts[2]


def orphan_keys(keys: Iterable[str], known_ids: Iterable[str]) -> list[str]:
    """Segment objects whose segment id the metadata does not know (in no state at all)."""
    known = set(known_ids)
    return [k for k in keys if (sid := stem_segment_id(k)) is not None and sid not in known]


def superseded_manifests(versions: Sequence[int]) -> list[int]:
    """Every manifest version but the newest."""
    return sorted(versions)[:-1]


def after_grace(first_seen: Mapping[str, int], present: Iterable[str], *, now_ms: int,
                grace_ms: int) -> tuple[list[str], dict[str, int]]:
    """Of the things ``present`` now (orphans, deleted segments, old manifests), those first seen
    at least ``grace_ms`` ago, and the first-seen times to keep (things no longer present are
    forgotten, new ones start their grace now)."""
    seen = {k: first_seen.get(k, now_ms) for k in present}
    due = sorted(k for k, t in seen.items() if now_ms - t >= grace_ms)
    return due, seen
