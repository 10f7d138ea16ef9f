"""Reading a topic's remote tier straight from the object store (no broker on the data path).

A ``RemoteTier`` names the store (``remote_storage="s3://bucket/prefix"`` or ``"file:///dir"``, with
``storage_options`` such as ``endpoint_url``; credentials otherwise from the usual AWS environment
variables) and pins, per partition, the newest manifest it saw first: everything one scan plans
and reads uses that one version, so a segment that retention deletes meanwhile is still there
(the store keeps superseded objects for the reader grace period). Remote segments are read through
one ``RemoteReadCache`` per tier (ranged GETs with read-ahead).

``TieredKafkaSource`` combines the store with a cluster: offsets up to the remote end (cut at the
first transaction the store alone cannot decide) come from the store, the rest through Kafka
Fetch requests, so a read over a topic with months of history touches the brokers for the tail
only.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from pylog.model import TRANSACTIONAL_MASK
from pylog.sdk.offsets import PartitionRange, TopicSource
from pylog.storage.remote_cache import RemoteReadCache
from pylog.storage.remote_layout import (
    RemoteManifest,
    manifest_versions,
    partition_prefix,
    read_manifest,
    topic_dirs,
)
from pylog.storage.remote_segment import RemoteLog
from pylog.storage.remote_store import RemoteStorageError, open_remote_store

# The read-ahead budget of an SDK read (env PYLOG_REMOTE_CACHE_BYTES overrides).
DEFAULT_CACHE_BYTES = 256 << 20
# Broker configs naming the store (DescribeConfigs), and the store option each becomes.
STORE_URI_CONFIG = "remote.log.storage.uri"
STORE_OPTION_CONFIGS = {"remote.log.storage.s3.endpoint": "endpoint_url",
                        "remote.log.storage.s3.region": "region"}
REMOTE_STORAGE_ENABLE = "remote.storage.enable"


@dataclass(frozen=True)
class RemoteStorageSpec:
    """Where the remote tier lives, as the user (or the broker's configs) named it."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None


def remote_spec(remote_storage: Any, storage_options: Any) -> RemoteStorageSpec | None:
    """Check the SDK's ``remote_storage`` / ``storage_options`` arguments (a plain message if wrong)."""
    if remote_storage is None:
        if storage_options:
            raise ValueError("storage_options= was given without remote_storage= (the store's URI)")
        return None
    if isinstance(remote_storage, RemoteStorageSpec):
        return remote_storage
    if not isinstance(remote_storage, str) or "://" not in remote_storage:
        raise ValueError(f"remote_storage must be a URI such as 's3://bucket/prefix' or 'file:///dir', "
                         f"not {remote_storage!r}")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise ValueError("storage_options must be a dict of store options, "
                         f"not {type(storage_options).__name__}")
    return RemoteStorageSpec(remote_storage, dict(storage_options or {}))


def remote_cache_bytes() -> int:
    """The read-ahead budget of one read (``DEFAULT_CACHE_BYTES``, or env PYLOG_REMOTE_CACHE_BYTES)."""
    return int(os.environ.get("PYLOG_REMOTE_CACHE_BYTES", DEFAULT_CACHE_BYTES))


class RemoteTier:
    """The store and the manifests one read planned with (pinned on first use)."""

    def __init__(self, spec: RemoteStorageSpec, *, cache_bytes: int | None = None,
                 pins: Mapping[tuple[str, int], tuple[uuid.UUID, int]] | None = None) -> None:
        self.spec = spec
        self.pins = dict(pins or {})  # (topic, partition) -> (topic id, manifest version) planned elsewhere
        self.store = open_remote_store(spec.uri, spec.options)
        self.cache = RemoteReadCache(cache_bytes or remote_cache_bytes())
        self._topic_ids: dict[str, uuid.UUID | None] = {}
        self._partitions: dict[str, list[int]] = {}
        self._manifests: dict[tuple[str, int], RemoteManifest | None] = {}
        self._newest: dict[tuple[str, int], int] = {}  # newest manifest version seen by `topic_id`
        self._logs: dict[tuple[str, int], RemoteLog | None] = {}

    def close(self) -> None:
        self.cache.close()

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic id whose objects hold ``topic`` (a topic deleted and created again leaves older
        ids behind until their objects are collected: the newest manifest wins)."""
        if topic not in self._topic_ids:
            if self.spec.topic_id is not None:
                self._topic_ids[topic] = self.spec.topic_id
                self._partitions[topic] = topic_dirs(self.store, topic).get(self.spec.topic_id, [])
            else:
                found = topic_dirs(self.store, topic)
                best: tuple[int, uuid.UUID] | None = None
                versions: dict[tuple[uuid.UUID, int], int] = {}
                for tid, parts in found.items():
                    for p in parts:
                        listed = manifest_versions(self.store, partition_prefix(topic, tid, p))
                        versions[(tid, p)] = max(listed, default=-1)
                    newest = max((versions[(tid, p)] for p in parts), default=-1)
                    if best is None or newest > best[0]:
                        best = (newest, tid)
                self._topic_ids[topic] = best[1] if best else None
                self._partitions[topic] = found[best[1]] if best else []
                if best:  # the newest manifest of each partition, as just listed (no second LIST)
                    self._newest.update({(topic, p): v for (tid, p), v in versions.items()
                                         if tid == best[1] and v >= 0})
        return self._topic_ids[topic]

    def partitions(self, topic: str) -> list[int]:
        self.topic_id(topic)
        return [p for p in self._partitions.get(topic, []) if self.manifest(topic, p) is not None]

    def manifest(self, topic: str, partition: int) -> RemoteManifest | None:
        key = (topic, partition)
        if key not in self._manifests and key in self.pins:  # planned on a driver: that version, one GET
            tid, version = self.pins[key]
            self._manifests[key] = read_manifest(self.store, partition_prefix(topic, tid, partition), version)
        if key not in self._manifests:
            tid_now = self.topic_id(topic)
            self._manifests[key] = None if tid_now is None else \
                read_manifest(self.store, partition_prefix(topic, tid_now, partition), self._newest.get(key))
        return self._manifests[key]

    def refresh(self, topic: str, partition: int) -> RemoteLog | None:
        """The partition's remote segments from its newest manifest, replacing the one pinned (a
        reader whose local log starts past the pinned segments' end needs the segments uploaded
        since)."""
        key = (topic, partition)
        for held in (self.pins, self._manifests, self._newest, self._logs):
            held.pop(key, None)
        return self.remote_log(topic, partition)

    def remote_log(self, topic: str, partition: int) -> RemoteLog | None:
        """The partition's remote segments (None: nothing remote)."""
        key = (topic, partition)
        if key not in self._logs:
            m = self.manifest(topic, partition)
            self._logs[key] = RemoteLog.from_manifest(self.store, m, self.cache) if m and m.segments else None
        return self._logs[key]


class TieredKafkaSource:
    """`TopicSource` over a cluster whose topic is tiered: the remote part from the store."""

    def __init__(self, kafka: Any, tier: RemoteTier, store_reader: TopicSource) -> None:
        """`store_reader`: a reader of `tier` alone (a `DirTopicSource` without a data directory)."""
        self.kafka = kafka
        self.tier = tier
        self.store_reader = store_reader

    def close(self) -> None:
        self.kafka.close()
        self.store_reader.close()

    def partitions(self, topic: str) -> list[int]:
        return self.kafka.partitions(topic)

    def _store_end(self, topic: str, partition: int) -> int:
        """The first offset a read through the store cannot decide alone: the remote end, or an
        earlier transaction whose marker is not in the store (read through Kafka from there).
        Costs a read of every remote side file, so only a range crossing the remote end asks."""
        (_start, end), = self.store_reader.offset_bounds(topic, [partition]).values()
        return end

    def offset_bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        """Kafka's bounds (its log start covers both tiers), the store's start where it is older."""
        out = dict(self.kafka.offset_bounds(topic, partitions))
        for p in partitions:
            log = self.tier.remote_log(topic, p)
            if log is not None:
                start, end = out[p]
                out[p] = (min(start, log.log_start_offset), max(end, log.log_end_offset))
        return out

    def offsets_for_times(self, topic: str, times: dict[int, int]) -> dict[int, int | None]:
        out: dict[int, int | None] = {}
        rest: dict[int, int] = {}
        for p, ts in times.items():
            has_remote = self.tier.remote_log(topic, p) is not None
            found = self.store_reader.offsets_for_times(topic, {p: ts})[p] if has_remote else None
            if found is not None:
                out[p] = found
            else:
                rest[p] = ts
        if rest:
            out.update(self.kafka.offsets_for_times(topic, rest))
        return out

    def _split(self, ranges: list[PartitionRange]) -> list[tuple[PartitionRange, PartitionRange | None,
                                                                 PartitionRange | None]]:
        """Each range as (itself, its part read from the store, its part read through Kafka)."""
        out: list[tuple[PartitionRange, PartitionRange | None, PartitionRange | None]] = []
        for r in ranges:
            log = self.tier.remote_log(r.topic, r.partition)
            if log is None or r.start >= log.log_end_offset:  # the tail: Kafka only
                out.append((r, None, r))
                continue
            inside = r.end <= log.log_end_offset and not len(
                log.batch_metadata(r.start, r.end, attributes=TRANSACTIONAL_MASK))
            # a transaction in the range may have its marker past the store: find where to cut
            cut = r.end if inside else self._store_end(r.topic, r.partition)
            if r.start >= cut:
                out.append((r, None, r))
                continue
            remote = replace(r, end=min(r.end, cut))
            rest = replace(r, start=cut) if r.end > cut else None
            out.append((r, remote, rest))
        return out

    def read(self, ranges: list[PartitionRange], columns: Sequence[str]
             ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        split = self._split(ranges)
        for r, remote, _rest in split:
            if remote is not None:
                for _r, batch in self.store_reader.read([remote], columns):
                    yield r, batch
        by_kafka = {(rest.topic, rest.partition): r for r, _remote, rest in split if rest is not None}
        if by_kafka:
            for got, batch in self.kafka.read([rest for _r, _x, rest in split if rest is not None], columns):
                yield by_kafka[(got.topic, got.partition)], batch


def store_from_broker_configs(configs: Mapping[str, str | None]) -> RemoteStorageSpec | None:
    """The store a broker names (``remote.log.storage.uri`` and its S3 settings); None if it names none."""
    uri = configs.get(STORE_URI_CONFIG)
    if not uri or (configs.get("remote.log.storage.system.enable") or "true").lower() != "true":
        return None
    options = {opt: v for name, opt in STORE_OPTION_CONFIGS.items() if (v := configs.get(name))}
    return RemoteStorageSpec(uri, options)


def reachable(spec: RemoteStorageSpec) -> bool:
    """Whether this client can list the store (its network and credentials)."""
    try:
        open_remote_store(spec.uri, spec.options).children("")
        return True
    except (RemoteStorageError, OSError, ValueError):
        return False


def discover_remote_storage(bootstrap_servers: Any, topic: str, security: Any = None
                            ) -> RemoteStorageSpec | None:
    """The store to read ``topic``'s remote tier from when the topic has ``remote.storage.enable``
    and a broker names the store (DescribeConfigs); None otherwise (read through Kafka only)."""
    return remote_tier_of(bootstrap_servers, topic, security)[1]


def remote_tier_of(bootstrap_servers: Any, topic: str, security: Any = None
                   ) -> tuple[bool, RemoteStorageSpec | None]:
    """(whether ``topic`` has ``remote.storage.enable``, the store a broker names for it or None)."""
    from pylog.sdk.admin import Admin

    async def ask(admin: Any) -> tuple[bool, RemoteStorageSpec | None]:
        topic_cfg = (await admin.topic_configs([topic])).get(topic, {})
        if (topic_cfg.get(REMOTE_STORAGE_ENABLE, (None, ""))[0] or "false").lower() != "true":
            return False, None
        info = await admin.cluster([topic])
        for broker in sorted(info.brokers):
            spec = store_from_broker_configs(await admin.broker_configs(broker))
            if spec is not None:
                tid = info.topic_ids.get(topic)
                return True, replace(spec, topic_id=tid) if isinstance(tid, uuid.UUID) and tid.int else spec
        return True, None

    with Admin(bootstrap_servers, security=security) as admin:
        return admin.run(ask)
