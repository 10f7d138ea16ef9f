"""read_topic(data_dir) hands over the segment's Arrow messages as they are: each message's value
bytes are the mapped segment's bytes (no copy), except runs of tiny messages, which are coalesced."""

from __future__ import annotations

from pathlib import Path

from sdk_helpers import LogWriter, write_topic_dir

import pylog
from pylog.sdk.dir_source import TINY_MESSAGE_ROWS


def _mapped_segments() -> list[tuple[int, int]]:
    """(start, end) addresses of the segment files this process has mapped."""
    out = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[5].endswith((".arrows", ".arrow")):
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            out.append((lo, hi))
    return out


def _inside(address: int, ranges: list[tuple[int, int]]) -> bool:
    return any(lo <= address < hi for lo, hi in ranges)


def test_messages_are_chunks_over_the_mapped_segment(tmp_path: Path) -> None:
    write_topic_dir(tmp_path, "t", [1000, 600], batch=200)  # 5 + 3 messages of 200 rows
    table = pylog.read_topic("t", data_dir=tmp_path)
    assert table.num_rows == 1600 and table.column("offset").to_pylist()[:3] == [0, 1, 2]
    value = table.column("value")
    assert [len(c) for c in value.chunks] == [200] * 8
    mapped = _mapped_segments()
    assert mapped, "no segment mapped"
    assert all(_inside(c.buffers()[2].address, mapped) for c in value.chunks)  # no copy of the values
    assert table.column("timestampType").to_pylist() == [0] * 1600
    assert table.column("partition").to_pylist() == [0] * 1000 + [1] * 600
    assert table.column("topic").unique().to_pylist() == ["t"]


def test_tiny_messages_are_coalesced(tmp_path: Path) -> None:
    w = LogWriter(tmp_path, "tiny")
    for _ in range(300):
        w.append(1)  # a producer sending one record per batch
    w.append(TINY_MESSAGE_ROWS)  # not tiny: stays as it is
    w.close()
    table = pylog.read_topic("tiny", data_dir=tmp_path)
    assert [len(c) for c in table.column("value").chunks] == [300, TINY_MESSAGE_ROWS]
    assert table.column("offset").to_pylist() == list(range(300 + TINY_MESSAGE_ROWS))
