"""A topic's partitions: leader, replicas / ISR, offsets, records, bytes and segments.

From a cluster (Metadata + ListOffsets; bytes from DescribeLogDirs when the broker offers it), from a
pylog data directory (the read-only partition logs: offsets, bytes, segments; no leaders), or both
(the cluster for leadership and offsets, the directory for bytes and segments). What neither source
knows is <NA>, and ``notes`` says why. For a topic with ``remote.storage.enable`` the cluster also
gives each tier's offsets (the local log start, one past the latest tiered offset, the upload lag)
and, when this client can reach the store, the remote bytes and segments; ``bytes`` and
``segments`` are the local ones.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pylog.widgets.admin import EARLIEST, LATEST, Admin, AsyncAdmin

from pylog._extras import require
from pylog.sdk.tiers import partition_tiers, tiered

if TYPE_CHECKING:
    import pandas

COLUMNS = ["topic", "partition", "leader", "replicas", "isr", "offline_replicas", "log_start_offset",
           "log_end_offset", "records", "bytes", "segments", "local_log_start_offset", "remote_end_offset",
           "remote_bytes", "remote_segments", "upload_lag"]
TIER_COLUMNS = COLUMNS[-5:]


async def _from_cluster(admin: AsyncAdmin, topic: str) -> tuple[list[dict[str, Any]], list[str]]:
    from pylog.sdk.offsets import UnknownTopicError

    info = await admin.cluster([topic])
    code = info.topic_errors.get(topic)
    parts = info.topics.get(topic, {})
    if code or not parts:
        raise UnknownTopicError(f"unknown topic {topic!r} on the cluster at {admin.client.bootstrap}"
                                + (f" (error {code})" if code else ""))
    starts = await admin.list_offsets(topic, parts, EARLIEST)
    ends = await admin.list_offsets(topic, parts, LATEST)
    sizes = await admin.log_dir_sizes(topic)
    tiers = await partition_tiers(admin, topic, parts) if await tiered(admin, topic) else {}
    notes = []
    if sizes is None:
        notes.append("bytes: the broker does not answer DescribeLogDirs; pass data_dir= to read them")
    rows = []
    for p in sorted(parts):
        info_p = parts[p]
        rows.append({"partition": p, "leader": info_p.leader, "replicas": info_p.replicas,
                     "isr": info_p.isr, "offline_replicas": info_p.offline,
                     "log_start_offset": starts.get(p), "log_end_offset": ends.get(p),
                     "bytes": None if sizes is None else sizes.get(p), "segments": None})
        if p in tiers:
            t = tiers[p]
            rows[-1] |= {"local_log_start_offset": t.local_log_start_offset,
                         "remote_end_offset": t.remote_end_offset, "upload_lag": t.upload_lag}
    return rows, notes


def _from_data_dir(data_dir: str | os.PathLike[str], topic: str) -> dict[int, dict[str, Any]]:
    from pylog.storage import PartitionLog, list_partitions

    from pylog.sdk.offsets import UnknownTopicError

    found = {p.partition: p.path for p in list_partitions(data_dir) if p.topic == topic}
    if not found:
        raise UnknownTopicError(f"unknown topic {topic!r}: no {topic}-N directory in {str(data_dir)!r}")
    out = {}
    for p, path in sorted(found.items()):
        log = PartitionLog.open_readonly(path)
        try:
            out[p] = {"log_start_offset": log.log_start_offset, "log_end_offset": log.log_end_offset,
                      "bytes": log.size_bytes, "segments": log.segment_count}
        finally:
            log.close()
    return out


def snapshot(topic: str, *, bootstrap_servers: Any = None, data_dir: Any = None,
             admin: Admin | None = None, security: Any = None) -> dict[str, Any]:
    """The JSON-able state behind `partitions` and `PartitionsWidget`."""
    if bootstrap_servers is None and data_dir is None and admin is None:
        raise ValueError("pass bootstrap_servers= (a Kafka cluster), data_dir= (a pylog data directory) "
                         "or both")
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    if bootstrap_servers is not None or admin is not None:
        own = admin is None
        adm = admin or Admin(bootstrap_servers, security=security)
        try:
            rows, notes = adm.run(lambda a: _from_cluster(a, topic))
            _remote_sizes(adm, topic, rows, notes, security)
        finally:
            if own:
                adm.close()
    if data_dir is not None:
        local = _from_data_dir(data_dir, topic)
        if rows:
            notes = [n for n in notes if not n.startswith("bytes:")]
            for r in rows:
                d = local.get(r["partition"], {})
                r["bytes"], r["segments"] = d.get("bytes"), d.get("segments")
        else:
            notes.append("leader, replicas and ISR: only a cluster knows them; pass bootstrap_servers=")
            rows = [{"partition": p, "leader": None, "replicas": None, "isr": None, "offline_replicas": None,
                     **d} for p, d in local.items()]
    else:
        notes.append("segments: only a data directory shows them; pass data_dir=")
    for r in rows:
        start, end = r["log_start_offset"], r["log_end_offset"]
        r["records"] = None if start is None or end is None else max(0, end - start)
        r["topic"] = topic
    notes.append("records: log end - log start offset (compacted or transactional topics hold fewer)")
    return {"topic": topic, "partitions": rows, "notes": notes,
            "source": {"bootstrap_servers": _servers(bootstrap_servers, admin),
                       "data_dir": None if data_dir is None else os.fspath(data_dir)}}


def _remote_sizes(admin: Admin, topic: str, rows: list[dict[str, Any]], notes: list[str],
                  security: Any) -> None:
    """Remote bytes and segments of a tiered topic, from the manifests in the store the brokers name."""
    if not any(r.get("remote_end_offset") is not None or "upload_lag" in r for r in rows):
        return
    from pylog.sdk.remote_source import discover_remote_storage
    from pylog.sdk.tiers import PartitionTiers, add_remote_sizes

    tiers = {r["partition"]: PartitionTiers(r["partition"], None, None, None, None) for r in rows}
    if add_remote_sizes(tiers, topic, discover_remote_storage(admin.bootstrap_servers, topic, security)):
        for r in rows:
            r["remote_bytes"] = tiers[r["partition"]].remote_bytes
            r["remote_segments"] = tiers[r["partition"]].remote_segments
    else:
        notes.append("remote_bytes: the store the brokers name is out of this client's reach")


def _servers(bootstrap_servers: Any, admin: Admin | None) -> str | None:
    value = bootstrap_servers
    if value is None and admin is not None:
        value = admin.bootstrap_servers
    if value is None or isinstance(value, str):
        return value
    return ",".join(value)


def frame(snap: dict[str, Any]) -> pandas.DataFrame:
    pd = require("pandas", "partitions()")

    df = pd.DataFrame([[r.get(c) for c in COLUMNS] for r in snap["partitions"]], columns=COLUMNS)
    for col in ("partition", "leader", "log_start_offset", "log_end_offset", "records", "bytes", "segments",
                *TIER_COLUMNS):
        df[col] = df[col].astype("Int64")
    df.attrs["notes"] = list(snap["notes"])
    return df


def partitions(topic: str, *, bootstrap_servers: Any = None, data_dir: Any = None,
               security: Any = None) -> pandas.DataFrame:
    """One row per partition of `topic`: ``topic, partition, leader, replicas, isr, offline_replicas,
    log_start_offset, log_end_offset, records, bytes, segments`` and, for a tiered topic,
    ``local_log_start_offset, remote_end_offset, remote_bytes, remote_segments, upload_lag`` (a pandas
    DataFrame; unknowns are
    <NA> and ``df.attrs["notes"]`` says why). Give bootstrap_servers=, data_dir= or both."""
    return frame(snapshot(topic, bootstrap_servers=bootstrap_servers, data_dir=data_dir, security=security))
