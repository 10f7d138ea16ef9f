"""Where the remote tier keeps a partition's segments and manifests, and what a manifest says.

Layout under the store's root (see FORMAT.md, "Remote tier"):

    <topic>-<topic id>/<partition>/segments/<base 20d>-<leader epoch>-<segment id>.<ext>
    <topic>-<topic id>/<partition>/manifest/<version 20d>.json

A segment's objects are the sealed local files copied byte for byte (``SEGMENT_FILES``, and the
``.wire`` file when the segment has one: ``OPTIONAL_SEGMENT_FILES``). Names
carry the topic id, base offset, uploading leader's epoch and a unique id, so two leaders'
uploads of the same offsets never overwrite each other. A manifest is an immutable snapshot of
the partition's committed remote segments; its version is the metadata-log offset of the last
change it reflects, so every broker that writes one for the same state writes the same object.
Readers that plan with a manifest version may rely on its objects for the store's deletion
grace period after a newer version supersedes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from .remote_store import RemoteStore

SEGMENT_FILES = (".arrow", ".index", ".timeindex", ".batches")
# uploaded when the sealed segment has it; readers do without (older uploads, pylog.segment.wire=false)
OPTIONAL_SEGMENT_FILES = (".wire",)
MANIFEST_FORMAT = 1


@dataclass(frozen=True, slots=True)
class RemoteLogSegment:
    """One uploaded segment: offsets ``[base_offset, end_offset]`` (end inclusive, as Kafka's)."""

    segment_id: str
    base_offset: int
    end_offset: int
    max_timestamp: int
    size_bytes: int
    leader_epoch: int
    epochs: tuple[tuple[int, int], ...] = ()  # (leader epoch, start offset) entries in the segment

    @property
    def stem(self) -> str:
        return f"{self.base_offset:020d}-{self.leader_epoch}-{self.segment_id}"

    def to_dict(self) -> dict[str, object]:
        return {"segment_id": self.segment_id, "base_offset": self.base_offset,
                "end_offset": self.end_offset, "max_timestamp": self.max_timestamp,
                "size_bytes": self.size_bytes, "leader_epoch": self.leader_epoch,
                "epochs": [list(e) for e in self.epochs]}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> RemoteLogSegment:
        epochs = tuple((int(e[0]), int(e[1])) for e in d.get("epochs", ()))  # type: ignore[attr-defined]
        return cls(str(d["segment_id"]), int(d["base_offset"]), int(d["end_offset"]),  # type: ignore[call-overload]
                   int(d["max_timestamp"]), int(d["size_bytes"]), int(d["leader_epoch"]),  # type: ignore[call-overload]
                   epochs)


class RemoteLogMetadata(Protocol):
    """Where a reader learns a partition's committed remote segments.

    Brokers answer from the metadata image (the metadata log is the source of truth); readers
    without a broker answer from the newest manifest in the store (``ManifestMetadata``).
    """

    def remote_segments(self, topic: str, topic_id: uuid.UUID,
                        partition: int) -> tuple[RemoteLogSegment, ...]:
        """Committed (copy finished, not being deleted) segments, sorted by base offset."""
        ...

    def remote_log_start_offset(self, topic: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """The partition's log start offset as the remote tier knows it; None if nothing is remote."""
        ...


def new_segment_id() -> str:
    return uuid.uuid4().hex


def topic_dir(topic: str, topic_id: uuid.UUID) -> str:
    return f"{topic}-{topic_id.hex}"


def partition_prefix(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{topic_dir(topic, topic_id)}/{partition}"


def segment_key(prefix: str, segment: RemoteLogSegment, ext: str) -> str:
    if ext not in SEGMENT_FILES and ext not in OPTIONAL_SEGMENT_FILES:
        raise ValueError(f"not a segment file extension: {ext!r}")
    return f"{prefix}/segments/{segment.stem}{ext}"


def segment_keys(prefix: str, segment: RemoteLogSegment) -> list[str]:
    """Every object a segment may have (for deletion: an optional one that is missing is no error)."""
    return [segment_key(prefix, segment, ext) for ext in (*SEGMENT_FILES, *OPTIONAL_SEGMENT_FILES)]


def manifest_key(prefix: str, version: int) -> str:
    return f"{prefix}/manifest/{version:020d}.json"


@dataclass(frozen=True, slots=True)
class RemoteManifest:
    """A partition's committed remote segments, sorted by base offset, at one metadata version."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    version: int
    log_start_offset: int
    segments: tuple[RemoteLogSegment, ...] = field(default=())

    @property
    def prefix(self) -> str:
        return partition_prefix(self.topic, self.topic_id, self.partition)

    @property
    def end_offset(self) -> int:
        """One past the last remote offset (the log start offset if nothing is remote)."""
        return self.segments[-1].end_offset + 1 if self.segments else self.log_start_offset

    def encode(self) -> bytes:
        return json.dumps({
            "format": MANIFEST_FORMAT, "topic": self.topic, "topic_id": str(self.topic_id),
            "partition": self.partition, "version": self.version,
            "log_start_offset": self.log_start_offset,
            "segments": [s.to_dict() for s in self.segments],
        }, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> RemoteManifest:
        d = json.loads(data)
        if d.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"remote manifest format {d.get('format')!r} is not {MANIFEST_FORMAT}")
        return cls(d["topic"], uuid.UUID(d["topic_id"]), int(d["partition"]), int(d["version"]),
                   int(d["log_start_offset"]),
                   tuple(RemoteLogSegment.from_dict(s) for s in d["segments"]))


def manifest_versions(store: RemoteStore, prefix: str) -> list[int]:
    out: list[int] = []
    for obj in store.list(f"{prefix}/manifest"):
        name = obj.key.rsplit("/", 1)[-1]
        if name.endswith(".json") and name[:-5].isdigit():
            out.append(int(name[:-5]))
    return sorted(out)


def read_manifest(store: RemoteStore, prefix: str, version: int | None = None) -> RemoteManifest | None:
    """The manifest at ``version``, or the newest one; None if the partition has none."""
    if version is None:
        versions = manifest_versions(store, prefix)
        if not versions:
            return None
        version = versions[-1]
    return RemoteManifest.decode(store.read_bytes(manifest_key(prefix, version)))


def topic_dirs(store: RemoteStore, topic: str) -> dict[uuid.UUID, list[int]]:
    """Topic ids under which ``topic`` has objects in the store, each with its partitions."""
    found: dict[uuid.UUID, list[int]] = {}
    head = f"{topic}-"
    for name in store.children(""):
        if not name.startswith(head) or len(name) != len(head) + 32:
            continue
        try:
            tid = uuid.UUID(hex=name[len(head):])
        except ValueError:
            continue
        found[tid] = sorted(int(p) for p in store.children(name) if p.isdigit())
    return found


def covering(segments: Iterable[RemoteLogSegment], start: int,
             end: int | None = None) -> list[RemoteLogSegment]:
    """Segments holding any offset in ``[start, end)`` (end None: to the last)."""
    return [s for s in segments if s.end_offset >= start and (end is None or s.base_offset < end)]


class ManifestMetadata:
    """``RemoteLogMetadata`` from the store's newest manifests, pinned once read (one LIST per partition)."""

    def __init__(self, store: RemoteStore) -> None:
        self.store = store
        self._pinned: dict[tuple[uuid.UUID, int], RemoteManifest | None] = {}

    def manifest(self, topic: str, topic_id: uuid.UUID, partition: int) -> RemoteManifest | None:
        key = (topic_id, partition)
        if key not in self._pinned:
            self._pinned[key] = read_manifest(self.store, partition_prefix(topic, topic_id, partition))
        return self._pinned[key]

    def remote_segments(self, topic: str, topic_id: uuid.UUID,
                        partition: int) -> tuple[RemoteLogSegment, ...]:
        m = self.manifest(topic, topic_id, partition)
        return m.segments if m else ()

    def remote_log_start_offset(self, topic: str, topic_id: uuid.UUID, partition: int) -> int | None:
        m = self.manifest(topic, topic_id, partition)
        return m.log_start_offset if m and m.segments else None
