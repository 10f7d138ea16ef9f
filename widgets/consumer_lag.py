"""Consumer lag of groups: committed offsets against log end offsets, who owns what, Burrow status.

`LagMonitor` polls a cluster (ListGroups, FindCoordinator, DescribeGroups, OffsetFetch, Metadata,
ListOffsets) and feeds a `LagWindow`, so repeated polls give Burrow statuses and a lag history;
`lag()` and `groups()` are its one-shot DataFrame forms. Log end offsets are high watermarks
(read_uncommitted), as in Kafka's ``kafka-consumer-groups.sh``. Given a data directory instead,
it reads ``__consumer_offsets`` and the logs there (`pylog.widgets.dir_lag`), where the commit
history itself is Burrow's window.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pylog.widgets.admin import LATEST, Admin, AsyncAdmin, GroupDescription, GroupMember
from pylog.widgets.burrow import LagWindow, Status, evaluate_group, evaluate_partition

from pylog._extras import require
from pylog.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    import pandas

PARTITION_COLUMNS = ["group", "topic", "partition", "committed_offset", "log_end_offset", "lag", "status",
                     "member_id", "client_id", "host", "group_state", "coordinator", "group_type",
                     "in_flight", "acquired"]
GROUP_COLUMNS = ["group", "state", "protocol_type", "protocol", "members", "coordinator", "partitions",
                 "total_lag", "max_lag", "status", "group_type", "in_flight", "acquired"]


@dataclass
class _GroupRaw:
    description: GroupDescription
    committed: dict[tuple[str, int], int]
    # share groups: (in flight, acquired) per partition; their "committed" offset is the start offset
    share: dict[tuple[str, int], tuple[int | None, int | None]] | None = None


async def collect(admin: AsyncAdmin, groups: Sequence[str] | None
                  ) -> tuple[list[_GroupRaw], dict[tuple[str, int], int | None]]:
    """Describe `groups` (None: every group the cluster lists) and the log end offsets of their topics."""
    names = [g.group_id for g in await admin.list_groups()] if groups is None else list(groups)

    async def one(name: str) -> _GroupRaw:
        desc = await admin.describe_group(name)
        committed = {}
        if desc.group_type == "share" and desc.coordinator is not None:
            offsets = await admin.share_offsets(name, desc.coordinator)
            return _GroupRaw(desc, {k: o.start_offset for k, o in offsets.items()},
                             {k: (o.in_flight, o.acquired) for k, o in offsets.items()})
        if desc.coordinator is not None and desc.state != "Dead":
            committed = await admin.committed_offsets(name, desc.coordinator)
        return _GroupRaw(desc, committed)

    raws = list(await asyncio.gather(*(one(n) for n in names)))
    topics = sorted({t for r in raws for (t, _p) in r.committed}
                    | {t for r in raws for m in r.description.members for t in m.assignment})
    ends: dict[tuple[str, int], int | None] = {}
    if topics:
        info = await admin.cluster(topics)
        for topic in topics:
            parts = info.topics.get(topic, {})
            if parts:
                for p, off in (await admin.list_offsets(topic, parts, LATEST)).items():
                    ends[(topic, p)] = off
    return raws, ends


def _coordinator(desc: GroupDescription) -> str:
    c = desc.coordinator
    return "" if c is None else f"{c.host}:{c.port} (node {c.node_id})"


Judge = Callable[[tuple[str, str, int], int, int, bool], "Status | None"]


def build_snapshot(raws: list[_GroupRaw], ends: dict[tuple[str, int], int | None], window: LagWindow,
                   now_ms: int, judge: Judge | None = None) -> dict[str, Any]:
    """The JSON-able state the widget and the DataFrames are drawn from. Statuses come from
    ``judge(key, committed, log_end, committing)``; by default polls feed `window`."""
    groups = []
    seen: list[tuple[str, str, int]] = []
    for raw in raws:
        desc = raw.description
        owners: dict[tuple[str, int], GroupMember] = {}
        share = raw.share
        for m in desc.members:
            for topic, parts in m.assignment.items():
                for p in parts:
                    owners.setdefault((topic, p), m)  # share partitions have several readers
        rows: list[dict[str, Any]] = []
        for (topic, p) in sorted(set(raw.committed) | set(owners)):
            committed = raw.committed.get((topic, p))
            end = ends.get((topic, p))
            owner = owners.get((topic, p))
            lag = None if committed is None or end is None else max(0, end - committed)
            status = None
            if committed is not None and end is not None:
                key = (desc.group, topic, p)
                seen.append(key)
                committing = owner is not None or (not owners and bool(desc.members))
                s = (judge(key, committed, end, committing) if judge is not None
                     else window.observe(key, committed, end, now_ms, committing=committing))
                status = None if s is None else s.value
            in_flight, acquired = share.get((topic, p), (None, None)) if share is not None else (None, None)
            rows.append({
                "topic": topic, "partition": p, "committed": committed, "log_end": end, "lag": lag,
                "status": status, "member_id": owner.member_id if owner else None,
                "client_id": owner.client_id if owner else None, "host": owner.host if owner else None,
                "in_flight": in_flight, "acquired": acquired,
            })
        lags = [r["lag"] for r in rows if r["lag"] is not None]
        statuses = [Status(r["status"]) for r in rows if r["status"] is not None]
        groups.append({
            "group": desc.group, "state": desc.state, "protocol_type": desc.protocol_type,
            "protocol": desc.protocol, "coordinator": _coordinator(desc),
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                         "partitions": sum(len(ps) for ps in m.assignment.values())} for m in desc.members],
            "total_lag": sum(lags), "max_lag": max(lags, default=0),
            "status": evaluate_group(statuses).value if statuses else None, "partitions": rows,
            "group_type": desc.group_type,
            "in_flight": _total(r["in_flight"] for r in rows),
            "acquired": _total(r["acquired"] for r in rows),
        })
    window.forget_except(seen)
    return {"updated_ms": now_ms, "error": None, "groups": groups}


def _total(values: Any) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


class LagMonitor:
    """Polls lag for `group` (a name, several, or None for all groups) and remembers a window of
    samples per partition (Burrow statuses) and `history_size` points of total lag per group."""

    def __init__(self, group: str | Sequence[str] | None = None, *, bootstrap_servers: Any = None,
                 data_dir: Any = None, window: LagWindow | None = None, history_size: int = 240,
                 security: Any = None, clock: Clock = SYSTEM_CLOCK) -> None:
        if (bootstrap_servers is None) == (data_dir is None):
            raise ValueError("pass exactly one of bootstrap_servers= (a Kafka cluster) or data_dir= "
                             "(a pylog data directory)")
        self.groups = [group] if isinstance(group, str) else (None if group is None else list(group))
        self.bootstrap_servers = bootstrap_servers
        self.security = security
        self.clock = clock
        self.data_dir = data_dir
        self.window = window or LagWindow()
        self.history: dict[str, deque[tuple[int, int]]] = {}
        self.history_size = history_size
        self.snapshot: dict[str, Any] = {"updated_ms": 0, "error": None, "groups": []}
        self._admin: Admin | None = None

    def poll(self, now_ms: int | None = None) -> dict[str, Any]:
        """One poll: the new snapshot (also kept as ``self.snapshot``). Errors propagate. `now_ms`
        (default: the clock's wall time) is the time the samples are taken at."""
        if now_ms is None:
            now_ms = self.clock.wall_ms()
        snap = self._poll_dir(now_ms) if self.data_dir is not None else self._poll_cluster(now_ms)
        for g in snap["groups"]:
            points = self.history.setdefault(g["group"], deque(maxlen=self.history_size))
            points.append((now_ms, g["total_lag"]))
        self.snapshot = snap
        return snap

    def _poll_dir(self, now_ms: int) -> dict[str, Any]:
        from pylog.widgets.dir_lag import collect_dir

        found, ends, history = collect_dir(self.data_dir, self.groups, self.window.size)
        raws = [_GroupRaw(desc, committed) for desc, committed in found]

        def judge(key: tuple[str, str, int], committed: int, end: int, _committing: bool) -> Status | None:
            samples = history.get(key)
            lag = max(0, end - committed)
            if not samples or (len(samples) < 2 and lag > self.window.allowed_lag):
                return Status.OK if lag <= self.window.allowed_lag else None  # one commit: no trend yet
            return evaluate_partition(samples, lag, now_ms, allowed_lag=self.window.allowed_lag)

        return build_snapshot(raws, ends, self.window, now_ms, judge)

    def _poll_cluster(self, now_ms: int) -> dict[str, Any]:
        if self._admin is None:
            self._admin = Admin(self.bootstrap_servers, security=self.security)
        admin = self._admin
        try:
            raws, ends = admin.run(lambda a: collect(a, self.groups))
        except BaseException:
            self.close()
            raise
        return build_snapshot(raws, ends, self.window, now_ms)

    def history_json(self) -> dict[str, list[list[int]]]:
        return {g: [list(p) for p in points] for g, points in self.history.items()}

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:
                pass

    def partitions_frame(self) -> pandas.DataFrame:
        return partitions_frame(self.snapshot)

    def groups_frame(self) -> pandas.DataFrame:
        return groups_frame(self.snapshot)


def partitions_frame(snapshot: dict[str, Any]) -> pandas.DataFrame:
    pd = require("pandas", "the lag DataFrames")

    rows = []
    for g in snapshot["groups"]:
        for r in g["partitions"]:
            rows.append([g["group"], r["topic"], r["partition"], r["committed"], r["log_end"], r["lag"],
                         r["status"], r["member_id"], r["client_id"], r["host"], g["state"],
                         g["coordinator"], g.get("group_type", "classic"), r.get("in_flight"),
                         r.get("acquired")])
    df = pd.DataFrame(rows, columns=PARTITION_COLUMNS)
    for col in ("partition", "committed_offset", "log_end_offset", "lag", "in_flight", "acquired"):
        df[col] = df[col].astype("Int64")
    return df


def groups_frame(snapshot: dict[str, Any]) -> pandas.DataFrame:
    pd = require("pandas", "the lag DataFrames")

    rows = [[g["group"], g["state"], g["protocol_type"], g["protocol"], len(g["members"]), g["coordinator"],
             len(g["partitions"]), g["total_lag"], g["max_lag"], g["status"], g.get("group_type", "classic"),
             g.get("in_flight"), g.get("acquired")] for g in snapshot["groups"]]
    df = pd.DataFrame(rows, columns=GROUP_COLUMNS)
    for col in ("members", "partitions", "total_lag", "max_lag", "in_flight", "acquired"):
        df[col] = df[col].astype("Int64")
    return df


def lag(group: str | Sequence[str] | None = None, *, bootstrap_servers: Any = None, data_dir: Any = None,
        monitor: LagMonitor | None = None, security: Any = None) -> pandas.DataFrame:
    """Per-partition lag of `group` (None: all groups) as a pandas DataFrame with columns
    ``group, topic, partition, committed_offset, log_end_offset, lag, status, member_id, client_id,
    host, group_state, coordinator``. ``lag`` is ``log_end_offset - committed_offset`` (<NA> where the
    group has not committed). ``status`` is Burrow's and needs a window of polls: a single call
    decides only OK (zero lag); pass the same `monitor` (a `LagMonitor`) to successive calls, or use
    the widget, to get WARN / STALL / STOP / ERR. With ``data_dir=`` (a pylog data directory, no
    broker) the commit history stored there is the window, so one call judges every partition.
    ``security``: Kafka client security settings, as for `pylog.read_topic`."""
    mon = monitor or LagMonitor(group, bootstrap_servers=bootstrap_servers, data_dir=data_dir,
                                security=security)
    try:
        mon.poll()
    finally:
        if monitor is None:
            mon.close()
    return mon.partitions_frame()


def groups(group: str | Sequence[str] | None = None, *, bootstrap_servers: Any = None,
           data_dir: Any = None, security: Any = None) -> pandas.DataFrame:
    """One row per group: ``group, state, protocol_type, protocol, members, coordinator, partitions,
    total_lag, max_lag, status`` (from a cluster or a data directory, as `lag`)."""
    mon = LagMonitor(group, bootstrap_servers=bootstrap_servers, data_dir=data_dir, security=security)
    try:
        mon.poll()
    finally:
        mon.close()
    return mon.groups_frame()
