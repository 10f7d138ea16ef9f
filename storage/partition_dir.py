"""A partition directory on disk: finding the partitions of a data directory, and the segment
files of one partition (data files, their side files) as a PartitionLog opens them."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from .files import FileReplaced
from .rewrite import SWAP_RE
from .segment import FILE_EXT, SIDE_EXTS, STREAM_EXT, Segment
from .wire import WIRE_EXT

_NAME_RE = re.compile(r"^(\d{20})(\.[a-z]+)$")
PARTITION_RE = re.compile(r"^(.+)-(\d+)$")


class PartitionDir(NamedTuple):
    topic: str
    partition: int
    path: Path


def list_partitions(data_dir: str | os.PathLike[str]) -> list[PartitionDir]:
    """Partition directories (`<topic>-<partition>`) of a data dir, by topic then partition;
    reads nothing but the directory listing."""
    out = []
    for entry in os.scandir(data_dir):
        m = PARTITION_RE.match(entry.name)
        if m and entry.is_dir():
            out.append(PartitionDir(m.group(1), int(m.group(2)), Path(entry.path)))
    return sorted(out, key=lambda p: (p.topic, p.partition))


def load_segments(directory: Path, readonly: bool, *, default_format: int = 1) -> list[Segment]:
    """The segments of a partition directory, by base offset (a stream whose schema message was
    torn is started again in `default_format`). A writer (`readonly` False) removes
    the stream file of a segment already sealed and side files without data; a read-only view
    notes each data file's inode, so it can tell when a writer replaced the file under it, and
    refuses a listing taken in the middle of a segment swap (`FileReplaced`: list again)."""
    data: dict[int, dict[str, int]] = {}
    inodes: dict[tuple[int, str], int] = {}
    side: set[int] = set()
    swapping: set[int] = set()  # segments whose new data file is still named `.swap`
    for entry in os.scandir(directory):
        m = _NAME_RE.match(entry.name)
        if not m:
            swap = SWAP_RE.match(entry.name)
            if swap and swap.group(2) in (FILE_EXT, STREAM_EXT):
                swapping.add(int(swap.group(1)))
            continue
        base, ext = int(m.group(1)), m.group(2)
        if ext in (FILE_EXT, STREAM_EXT):
            data.setdefault(base, {})[ext] = entry.stat().st_size
            inodes[(base, ext)] = entry.inode()
        elif ext in SIDE_EXTS or ext == WIRE_EXT:
            side.add(base)
    if readonly and swapping - data.keys():
        # A writer is between unlinking a segment's old data file and renaming the new one in: the
        # listing lacks that segment, so a view of it would have a hole (the caller lists again).
        raise FileReplaced(f"{directory}: a segment is being rewritten (base offsets "
                           f"{sorted(swapping - data.keys())})")
    segments = []
    for base in sorted(data):
        exts = data[base]
        sealed = FILE_EXT in exts
        if sealed and STREAM_EXT in exts and not readonly:
            os.unlink(directory / f"{base:020d}{STREAM_EXT}")
        seg = Segment(directory, base, sealed=sealed, data_size=exts[FILE_EXT if sealed else STREAM_EXT],
                      readonly=readonly, default_format=default_format)
        if readonly:
            seg.inode = inodes[(base, FILE_EXT if sealed else STREAM_EXT)]
        if not sealed:
            seg.recover()
        segments.append(seg)
    if not readonly:
        for base in side - data.keys():
            for ext in (*SIDE_EXTS, WIRE_EXT):
                try:
                    os.unlink(directory / f"{base:020d}{ext}")
                except FileNotFoundError:
                    pass
    return segments
