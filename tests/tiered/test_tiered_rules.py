"""The remote tier's rules (pylog.tiered.rules), with seeded property tests: copies continue
after the committed remote end across leader changes with different segment boundaries (no gap,
no offset twice); local segments leave only when covered, manifested and past local retention;
remote retention removes a prefix and keeps retention.bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pylog.storage.remote_layout import RemoteLogSegment

from pylog.tiered.rules import (
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    LocalSegment,
    RemoteEntry,
    after_grace,
    deletable_local,
    expired_remote,
    log_start_after,
    next_copies,
    orphan_keys,
    remote_end,
    stale_copies,
    superseded_manifests,
)


def segments_of(
    batch_ends: list[int], rolls: set[int], *, sealed_upto: int | None = None
) -> list[LocalSegment]:
    """Local segments cut at the batch ends in ``rolls``; the last one is the active segment."""
    out, base = [], 0
    for end in batch_ends:
        if end in rolls:
            out.append(LocalSegment(base, end, 100 * (end - base), end, True))
            base = end
    out.append(LocalSegment(base, batch_ends[-1] if batch_ends else 0, 1, 0, False))
    if sealed_upto is not None:
        out = [s if i < sealed_upto else LocalSegment(s.base_offset, s.next_offset, s.size_bytes,
                                                      s.max_timestamp, False)
               for i, s in enumerate(out)]
    return out


def seg(sid: str, base: int, end: int, ts: int = 0, size: int = 10) -> RemoteLogSegment:
    return RemoteLogSegment(sid, base, end, ts, size, 0)


batches = st.lists(st.integers(1, 5), min_size=1, max_size=40).map(
    lambda sizes: [sum(sizes[: i + 1]) for i in range(len(sizes))])


@given(batches, st.data())
def test_copies_continue_across_leaders_without_gaps_or_duplicates(
    ends: list[int], data: st.DataObject
) -> None:
    entries: list[RemoteEntry] = []
    rounds = data.draw(st.integers(1, 4))
    for r in range(rounds):
        rolls = set(data.draw(st.lists(st.sampled_from(ends), max_size=len(ends))))
        local = segments_of(ends, rolls)
        hw = data.draw(st.integers(0, ends[-1]))
        limit = data.draw(st.integers(1, 5))
        for c in next_copies(local, entries, high_watermark=hw, last_stable_offset=ends[-1],
                             log_start_offset=0, limit=limit):
            assert c.end_offset < hw and c.local.sealed and c.base_offset <= c.end_offset
            assert c.base_offset in (0, *ends)  # a batch boundary every replica shares
            assert c.local.base_offset <= c.base_offset
            entries.append(RemoteEntry(seg(f"{r}-{c.base_offset}", c.base_offset, c.end_offset),
                                       COPY_SEGMENT_FINISHED))
    spans = sorted((e.segment.base_offset, e.segment.end_offset) for e in entries)
    expected = 0
    for base, end in spans:
        assert base == expected, f"gap or overlap at {base} (expected {expected}): {spans}"
        expected = end + 1
    assert remote_end(entries) == expected - 1


def test_copies_stop_at_the_first_segment_that_cannot_go() -> None:
    local = segments_of([10, 20, 30, 40], {10, 20, 30}, sealed_upto=1)
    got = next_copies(local, [], high_watermark=40, last_stable_offset=40, log_start_offset=0)
    assert [(c.base_offset, c.end_offset) for c in got] == [(0, 9)]
    local = segments_of([10, 20, 30, 40], {10, 20, 30})
    got = next_copies(local, [], high_watermark=40, last_stable_offset=15, log_start_offset=0)
    assert [(c.base_offset, c.end_offset) for c in got] == [(0, 9)]
    got = next_copies(local, [], high_watermark=40, last_stable_offset=40, log_start_offset=12)
    assert [(c.base_offset, c.end_offset) for c in got] == [(12, 19), (20, 29)]


def test_stale_copies_are_the_ones_no_upload_is_finishing() -> None:
    entries = [RemoteEntry(seg("a", 0, 9), COPY_SEGMENT_STARTED),
               RemoteEntry(seg("b", 10, 19), COPY_SEGMENT_STARTED),
               RemoteEntry(seg("c", 0, 9), COPY_SEGMENT_FINISHED)]
    assert [s.segment_id for s in stale_copies(entries, ["b"])] == ["a"]


@given(batches, st.data())
def test_local_deletion_needs_cover_and_retention(ends: list[int], data: st.DataObject) -> None:
    rolls = set(data.draw(st.lists(st.sampled_from(ends), max_size=len(ends))))
    local = segments_of(ends, rolls)
    manifested = data.draw(st.integers(-1, ends[-1]))
    lso = data.draw(st.integers(0, ends[-1]))
    ms = data.draw(st.sampled_from([-1, 0, 5, 50]))
    size = data.draw(st.sampled_from([-1, 0, 100, 1000]))
    now = data.draw(st.integers(0, 100))
    n = deletable_local(local, manifested_end=manifested, log_start_offset=lso, now_ms=now,
                        local_retention_ms=ms, local_retention_bytes=size)
    assert 0 <= n < len(local)
    total = sum(s.size_bytes for s in local)
    for s in local[:n]:
        assert s.next_offset - 1 <= manifested or s.next_offset <= lso
        total -= s.size_bytes
    if ms == -1 and size >= 0:
        below = sum(s.size_bytes for s in local[:n] if s.next_offset <= lso)
        assert n == 0 or total >= size or below, "deleted below local.retention.bytes"
    if n < len(local) - 1 and ms == 0 and size == -1:
        nxt = local[n]
        assert (nxt.next_offset - 1 > manifested and nxt.next_offset > lso) or now - nxt.max_timestamp <= 0


def test_local_deletion_examples() -> None:
    local = segments_of([10, 20, 30, 40], {10, 20, 30})  # 1000 bytes each, active last
    common = {"log_start_offset": 0, "now_ms": 0, "local_retention_ms": -1}
    assert deletable_local(local, manifested_end=-1, local_retention_bytes=0, **common) == 0
    assert deletable_local(local, manifested_end=19, local_retention_bytes=0, **common) == 2
    assert deletable_local(local, manifested_end=29, local_retention_bytes=1500, **common) == 1
    assert deletable_local(local, manifested_end=39, local_retention_bytes=0, **common) == 3


@given(st.lists(st.tuples(st.integers(1, 10), st.integers(0, 100), st.integers(1, 50)), max_size=12),
       st.integers(-1, 200), st.integers(-1, 300), st.integers(0, 100), st.integers(0, 120))
def test_remote_retention_removes_a_prefix(spec: list[tuple[int, int, int]], retention_ms: int,
                                          retention_bytes: int, local_bytes: int, lso: int) -> None:
    segs, base = [], 0
    for i, (n, ts, size) in enumerate(spec):
        segs.append(seg(str(i), base, base + n - 1, ts, size))
        base += n
    gone = expired_remote(segs, now_ms=100, retention_ms=retention_ms, retention_bytes=retention_bytes,
                          local_only_bytes=local_bytes, log_start_offset=lso)
    assert gone == segs[: len(gone)]
    left = segs[len(gone):]
    if retention_ms == -1 and retention_bytes >= 0 and not any(s.end_offset < lso for s in gone):
        assert sum(s.size_bytes for s in left) + local_bytes >= retention_bytes
    for s in left[:1]:
        assert s.end_offset >= lso
    start = log_start_after(segs, gone, 0, base)
    assert start == (left[0].base_offset if (gone and left) else base if gone else 0)


def test_orphans_and_grace() -> None:
    keys = ["t-x/0/segments/00000000000000000000-0-aa.arrow",
            "t-x/0/segments/00000000000000000010-1-bb.index",
            "t-x/0/manifest/00000000000000000007.json"]
    assert orphan_keys(keys, ["aa"]) == [keys[1]]
    assert superseded_manifests([7, 3, 9]) == [3, 7]
    due, seen = after_grace({}, ["k1"], now_ms=100, grace_ms=50)
    assert due == [] and seen == {"k1": 100}
    due, seen = after_grace(seen, ["k1", "k2"], now_ms=149, grace_ms=50)
    assert due == [] and seen == {"k1": 100, "k2": 149}
    due, seen = after_grace(seen, ["k1", "k2"], now_ms=150, grace_ms=50)
    assert due == ["k1"]
    due, seen = after_grace(seen, ["k2"], now_ms=150, grace_ms=0)
    assert due == ["k2"] and "k1" not in seen
