"""Consumer lag from a pylog data directory, no broker: the committed offsets and group metadata kept
in ``__consumer_offsets`` (Kafka's record format, decoded by `pylog.groups.records`) against the
partitions' log end offsets.

Commits carry their times, so Burrow's window here is the real commit history: the last `window`
commits of each partition, each with the lag at its time (the log end offset then is taken as the
first offset stamped at or after the commit, from the partition's time index). Group state is what
the last stored generation says: members, or Empty.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pylog.widgets.admin import GroupDescription, GroupMember, decode_assignment
from pylog.widgets.burrow import OffsetSample

from pylog.groups.records import GroupKey, OffsetKey, decode_group_value, decode_key, decode_offset_value

OFFSETS_TOPIC = "__consumer_offsets"


class _Logs:
    """Read-only partition logs of a data directory, opened once."""

    def __init__(self, data_dir: Path) -> None:
        from pylog.storage import list_partitions

        self.dirs = {(p.topic, p.partition): p.path for p in list_partitions(data_dir)}
        self._open: dict[tuple[str, int], Any] = {}

    def log(self, topic: str, partition: int) -> Any:
        from pylog.storage import PartitionLog

        key = (topic, partition)
        if key not in self._open:
            path = self.dirs.get(key)
            self._open[key] = None if path is None else PartitionLog.open_readonly(path)
        return self._open[key]

    def close(self) -> None:
        for log in self._open.values():
            if log is not None:
                log.close()


def _records(data_dir: Path) -> list[tuple[bytes, bytes | None]]:
    from pylog.sdk import scan_topic
    from pylog.sdk.offsets import UnknownTopicError

    try:
        table = scan_topic(OFFSETS_TOPIC, data_dir=data_dir, columns=["partition", "offset", "key", "value"]
                           ).to_arrow()
    except UnknownTopicError:
        return []
    table = table.sort_by([("partition", "ascending"), ("offset", "ascending")])
    return list(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))


def collect_dir(data_dir: str | os.PathLike[str], groups: Sequence[str] | None, window: int
                ) -> tuple[list[tuple[GroupDescription, dict[tuple[str, int], int]]],
                           dict[tuple[str, int], int | None], dict[tuple[str, str, int], list[OffsetSample]]]:
    """([(group, committed offsets)], log end offsets, commit samples per (group, topic, partition))."""
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"data_dir {str(root)!r} is not a directory")
    commits: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
    metadata: dict[str, Any] = {}
    for key_bytes, value in _records(root):
        if key_bytes is None:
            continue
        key = decode_key(key_bytes)
        if isinstance(key, OffsetKey):
            k = (key.group_id, key.topic, key.partition)
            if value is None:
                commits.pop(k, None)
            else:
                v = decode_offset_value(value)
                commits.setdefault(k, []).append((v.offset, v.commit_timestamp))
        elif isinstance(key, GroupKey):
            if value is None:
                metadata.pop(key.group_id, None)
            else:
                metadata[key.group_id] = decode_group_value(value)
    names = sorted({g for g, _t, _p in commits} | set(metadata)) if groups is None else list(groups)
    logs = _Logs(root)
    try:
        out = []
        ends: dict[tuple[str, int], int | None] = {}
        history: dict[tuple[str, str, int], list[OffsetSample]] = {}
        for name in names:
            meta = metadata.get(name)
            members = []
            if meta is not None:
                consumer = meta.protocol_type in ("consumer", "")
                members = [
                    GroupMember(m.member_id, m.client_id, m.client_host.lstrip("/"), m.group_instance_id,
                                decode_assignment(m.assignment) if consumer else {})
                    for m in meta.members]
            desc = GroupDescription(name, "Stable" if members else "Empty",
                                    meta.protocol_type if meta else "", (meta.protocol or "") if meta else "",
                                    members, None)
            committed = {(t, p): c[-1][0] for (g, t, p), c in commits.items() if g == name}
            out.append((desc, committed))
            wanted = set(committed) | {(t, p) for m in members for t, ps in m.assignment.items() for p in ps}
            for (t, p) in wanted:
                log = logs.log(t, p)
                ends[(t, p)] = None if log is None else log.log_end_offset
            for (t, p) in committed:
                log = logs.log(t, p)
                if log is None:
                    continue
                samples = []
                for offset, ts in commits[(name, t, p)][-window:]:
                    found = log.offset_for_timestamp(ts)
                    end_then = log.log_end_offset if found is None else found[0]
                    samples.append(OffsetSample(offset, ts, max(0, end_then - offset)))
                history[(name, t, p)] = samples
        return out, ends, history
    finally:
        logs.close()
