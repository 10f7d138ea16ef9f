"""Where a topic's partitions live: the local log and the remote tier, as a client can see them.

Offsets come from ListOffsets (earliest over both tiers -2, earliest local -4, latest tiered -5,
high watermark -1); local bytes from DescribeLogDirs; remote bytes and segment counts from the
partition manifests in the store the brokers name, when this client can reach it. The upload lag
of a partition is its high watermark minus one past its latest tiered offset: offsets not yet in
the store (the active segment always counts, as it is never uploaded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pylog.sdk.admin import EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED, AsyncAdmin, PartitionInfo
from pylog.sdk.client import KafkaError
from pylog.sdk.remote_source import REMOTE_STORAGE_ENABLE, RemoteStorageSpec, RemoteTier, reachable


@dataclass
class PartitionTiers:
    partition: int
    log_start_offset: int | None
    local_log_start_offset: int | None
    remote_end_offset: int | None  # one past the latest tiered offset (None: nothing in the store)
    high_watermark: int | None
    local_bytes: int | None = None
    remote_bytes: int | None = None
    remote_segments: int | None = None

    @property
    def upload_lag(self) -> int | None:
        """Offsets below the high watermark not yet in the store."""
        if self.high_watermark is None:
            return None
        start = self.remote_end_offset if self.remote_end_offset is not None else self.log_start_offset
        return None if start is None else max(0, self.high_watermark - start)


async def tiered(admin: AsyncAdmin, topic: str) -> bool:
    """Whether the topic has ``remote.storage.enable=true``."""
    try:
        cfg = (await admin.topic_configs([topic])).get(topic, {})
    except KafkaError:
        return False
    return (cfg.get(REMOTE_STORAGE_ENABLE, (None, ""))[0] or "false").lower() == "true"


async def partition_tiers(admin: AsyncAdmin, topic: str, parts: dict[int, PartitionInfo]
                          ) -> dict[int, PartitionTiers]:
    """Both tiers' offsets and local bytes of every partition in ``parts``."""
    starts = await admin.list_offsets(topic, parts, EARLIEST)
    ends = await admin.list_offsets(topic, parts, LATEST)
    try:
        local = await admin.list_offsets(topic, parts, EARLIEST_LOCAL)
        tiered_end = await admin.list_offsets(topic, parts, LATEST_TIERED)
    except KafkaError:  # a broker without ListOffsets v9: nothing is tiered there
        local, tiered_end = dict(starts), {}
    sizes = await admin.log_dir_sizes(topic)
    out = {}
    for p in parts:
        latest = tiered_end.get(p)
        out[p] = PartitionTiers(p, starts.get(p), local.get(p),
                                None if latest is None or latest < 0 else latest + 1, ends.get(p),
                                None if sizes is None else sizes.get(p))
    return out


def add_remote_sizes(rows: dict[int, PartitionTiers], topic: str, store: RemoteStorageSpec | None) -> bool:
    """Fill remote bytes and segment counts from the newest manifests; False if the store is out
    of this client's reach."""
    if store is None or not reachable(store):
        return False
    tier = RemoteTier(store)
    try:
        for p, row in rows.items():
            m = tier.manifest(topic, p)
            row.remote_bytes = sum(s.size_bytes for s in m.segments) if m else 0
            row.remote_segments = len(m.segments) if m else 0
    finally:
        tier.close()
    return True


def describe_tiers(admin: Any, topic: str, security: Any = None) -> dict[int, PartitionTiers] | None:
    """`partition_tiers` (with remote sizes when the store is reachable) of a tiered topic through a
    blocking ``Admin``; None when the topic is not tiered."""
    from pylog.sdk.remote_source import discover_remote_storage

    async def go(a: AsyncAdmin) -> dict[int, PartitionTiers] | None:
        if not await tiered(a, topic):
            return None
        info = await a.cluster([topic])
        return await partition_tiers(a, topic, info.topics.get(topic, {}))

    rows: dict[int, PartitionTiers] | None = admin.run(go)
    if rows is not None:
        add_remote_sizes(rows, topic, discover_remote_storage(admin.bootstrap_servers, topic, security))
    return rows
