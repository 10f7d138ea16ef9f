"""Per-topic log configuration under Kafka's topic config names and defaults."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from pylog.model import LONG_MAX

_POLICIES = {"delete", "compact", "compact,delete", "delete,compact"}
_TIMESTAMP_TYPES = {"CreateTime", "LogAppendTime"}
# `pylog.segment.compression`: how segment bodies are compressed (see storage.ipc.body_codec).
SEGMENT_COMPRESSION = ("producer", "none", "lz4", "zstd")
# `pylog.segment.format`: the format new segments are written in (FORMAT.md): 1 (Arrow columns
# plus `.wire`) or 2 (one copy: Arrow views into the producer's records sections); new segments
# are written in format 2 unless a topic or the broker asks for 1, and segments of either are read
SEGMENT_FORMATS = (1, 2)
DEFAULT_SEGMENT_FORMAT = 2


@dataclass(frozen=True)
class LogConfig:
    """Topic-level settings the partition log obeys; field names are Kafka's with `_` for `.`."""

    segment_bytes: int = field(default=1073741824, metadata={"kafka": "segment.bytes"})
    segment_ms: int = field(default=604800000, metadata={"kafka": "segment.ms"})
    segment_index_bytes: int = field(default=10485760, metadata={"kafka": "segment.index.bytes"})
    index_interval_bytes: int = field(default=4096, metadata={"kafka": "index.interval.bytes"})
    retention_ms: int = field(default=604800000, metadata={"kafka": "retention.ms"})
    retention_bytes: int = field(default=-1, metadata={"kafka": "retention.bytes"})
    cleanup_policy: str = field(default="delete", metadata={"kafka": "cleanup.policy"})
    delete_retention_ms: int = field(default=86400000, metadata={"kafka": "delete.retention.ms"})
    min_compaction_lag_ms: int = field(default=0, metadata={"kafka": "min.compaction.lag.ms"})
    max_compaction_lag_ms: int = field(default=LONG_MAX, metadata={"kafka": "max.compaction.lag.ms"})
    min_cleanable_dirty_ratio: float = field(default=0.5, metadata={"kafka": "min.cleanable.dirty.ratio"})
    flush_messages: int = field(default=LONG_MAX, metadata={"kafka": "flush.messages"})
    flush_ms: int = field(default=LONG_MAX, metadata={"kafka": "flush.ms"})
    message_timestamp_type: str = field(default="CreateTime", metadata={"kafka": "message.timestamp.type"})
    max_message_bytes: int = field(default=1048588, metadata={"kafka": "max.message.bytes"})
    segment_compression: str = field(default="producer", metadata={"kafka": "pylog.segment.compression"})
    # `pylog.segment.wire`: sealed segments keep their Kafka batches' wire bytes (`.wire`, wire.py)
    segment_wire: bool = field(default=True, metadata={"kafka": "pylog.segment.wire"})
    segment_format: int = field(default=DEFAULT_SEGMENT_FORMAT, metadata={"kafka": "pylog.segment.format"})
    # the remote tier (KIP-405): -2 local retention means "the same as retention.ms / .bytes"
    remote_storage_enable: bool = field(default=False, metadata={"kafka": "remote.storage.enable"})
    local_retention_ms: int = field(default=-2, metadata={"kafka": "local.retention.ms"})
    local_retention_bytes: int = field(default=-2, metadata={"kafka": "local.retention.bytes"})

    def __post_init__(self) -> None:
        if self.cleanup_policy.replace(" ", "") not in _POLICIES:
            raise ValueError(f"cleanup.policy must be delete and/or compact, not {self.cleanup_policy!r}")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"not {self.message_timestamp_type!r}")
        if self.segment_compression not in SEGMENT_COMPRESSION:
            raise ValueError(f"pylog.segment.compression must be one of {', '.join(SEGMENT_COMPRESSION)}, "
                             f"not {self.segment_compression!r}")
        if self.segment_format not in SEGMENT_FORMATS:
            raise ValueError(f"pylog.segment.format must be 1 or 2, not {self.segment_format!r}")
        if self.segment_bytes < 14:
            raise ValueError("segment.bytes must be at least 14")
        if self.segment_index_bytes < 4 * 80:
            raise ValueError("segment.index.bytes too small")

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def from_kafka(cls, configs: dict[str, str], *, strict: bool = False) -> LogConfig:
        """Build from Kafka topic configs (`{"segment.bytes": "1024"}`); unknown names are ignored
        unless `strict`, malformed values raise ValueError."""
        by_name = {f.metadata["kafka"]: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, object] = {}
        for name, raw in configs.items():
            f = by_name.get(name)
            if f is None:
                if strict:
                    raise ValueError(f"unknown topic config {name!r}")
                continue
            if f.type in ("bool", bool):
                value = str(raw).strip().lower()
                if value not in ("true", "false"):
                    raise ValueError(f"{name} must be true or false, not {raw!r}")
                kwargs[f.name] = value == "true"
            elif f.type in ("int", int):
                kwargs[f.name] = int(raw)
            elif f.type in ("float", float):
                kwargs[f.name] = float(raw)
            else:
                kwargs[f.name] = str(raw).replace(" ", "")
        return cls(**kwargs)  # type: ignore[arg-type]

    def to_kafka(self) -> dict[str, str]:
        """Kafka names to string values (DescribeConfigs)."""
        return {f.metadata["kafka"]: _kafka_str(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def kafka_names(cls) -> list[str]:
        return [f.metadata["kafka"] for f in dataclasses.fields(cls)]


def _kafka_str(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
