"""The broker settings of the remote tier, checked at start: a node that turns the tier on must
name a store it can open, or it does not start."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pylog.config import BrokerConfig, ConfigError

SYSTEM_ENABLE = "remote.log.storage.system.enable"
URI = "remote.log.storage.uri"
UPLOAD_WIRE = "pylog.remote.log.storage.upload.wire"


@dataclass(frozen=True)
class RemoteTierSettings:
    uri: str
    store_options: dict[str, str] = field(default_factory=dict)
    grace_ms: int = 300000
    task_interval_ms: int = 30000
    threads: int = 10
    # upload sealed segments' `.wire` files too: remote fetches then send slices of them instead of
    # encoding from Arrow, about twice as fast a catch-up from the store for about twice its bytes
    upload_wire: bool = True

    @classmethod
    def from_config(cls, config: BrokerConfig) -> RemoteTierSettings | None:
        """None when the remote tier is off; ConfigError when it is on without a usable store URI."""
        if not config.bool(SYSTEM_ENABLE):
            return None
        uri = (config.raw(URI) or "").strip()
        if not uri:
            raise ConfigError(f"{SYSTEM_ENABLE}=true needs {URI} (file:///path or s3://bucket/prefix)")
        parts = urlsplit(uri)
        if parts.scheme not in ("file", "s3"):
            raise ConfigError(f"{URI}={uri!r}: the scheme must be file:// or s3://")
        local_ok = parts.netloc in ("", "localhost") and parts.path.startswith("/")
        if parts.scheme == "file" and not local_ok:
            raise ConfigError(f"{URI}={uri!r}: a file URI names an absolute directory (file:///path)")
        if parts.scheme == "s3" and not parts.netloc:
            raise ConfigError(f"{URI}={uri!r}: no bucket (s3://bucket/prefix)")
        options = {}
        for name, key in (("remote.log.storage.s3.endpoint", "endpoint_url"),
                          ("remote.log.storage.s3.region", "region")):
            value = config.raw(name)
            if value:
                options[key] = value
        timeout_ms = config.int("remote.log.storage.s3.request.timeout.ms")
        if timeout_ms < 1:
            raise ConfigError("remote.log.storage.s3.request.timeout.ms must be at least 1")
        if parts.scheme == "s3":
            options["request_timeout_s"] = str(timeout_ms / 1000)
        threads = config.int("remote.log.manager.copier.thread.pool.size")
        interval = config.int("remote.log.manager.task.interval.ms")
        grace = config.int("remote.log.reader.grace.ms")
        if threads < 1 or interval < 1 or grace < 0:
            raise ConfigError("remote.log.manager.copier.thread.pool.size and "
                              "remote.log.manager.task.interval.ms must be at least 1, "
                              "remote.log.reader.grace.ms at least 0")
        return cls(uri, options, grace, interval, threads, config.bool(UPLOAD_WIRE))
