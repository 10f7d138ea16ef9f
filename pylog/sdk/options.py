"""`ReadOptions`: how a topic is read (its source, bounds, columns, decoding), written and checked once.

Every read entry point (`pylog.read_topic`, `pylog.scan_topic`, `pylog.scan_polars`, `pylog.sql`,
`pylog.read_table`, `pylog.follow`, the Spark source) builds one `ReadOptions` from its keywords and
passes it down; the layers below take it whole. Misuse is a ``ValueError`` with a plain message,
raised when the options are built, never at read time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pylog.sdk.schema import output_columns

if TYPE_CHECKING:
    from pylog.sdk.decoders import DecodeSpec
    from pylog.sdk.offsets import OffsetSpec, TimestampSpec
    from pylog.sdk.remote_source import RemoteStorageSpec

# how a read through brokers travels: the Kafka protocol, Arrow Flight, or Flight when the cluster
# serves it (see `pylog.sdk.flight_source`)
TRANSPORTS = ("auto", "kafka", "flight")
DECODE_ERRORS = ("raise", "null")


@dataclass(frozen=True)
class ReadOptions:
    """The keywords of `pylog.scan_topic` (see its doc for each), checked on construction.

    ``read_committed=False`` (a data directory alone) reads up to the high watermark, open and
    aborted transactions included; the public functions always read committed."""

    data_dir: Any = None
    bootstrap_servers: Any = None
    partitions: Sequence[int] | None = None
    starting_offsets: OffsetSpec = "earliest"
    ending_offsets: OffsetSpec = "latest"
    starting_timestamp: TimestampSpec = None
    ending_timestamp: TimestampSpec = None
    include_headers: bool = False
    columns: Sequence[str] | None = None
    decode: DecodeSpec = None
    fetch_options: Any = None
    schema_registry_url: str | None = None
    on_decode_error: str = "raise"
    progress: bool | None = None
    security: Any = None
    remote_storage: Any = None
    storage_options: Any = None
    transport: str = "auto"
    flight: str | None = None
    binary_view: bool = False
    read_committed: bool = field(default=True, repr=False)

    def __post_init__(self) -> None:
        from pylog.sdk.remote_source import remote_spec

        if self.partitions is not None:
            object.__setattr__(self, "partitions", tuple(int(p) for p in self.partitions))
        if not isinstance(self.binary_view, bool):
            raise ValueError(f"binary_view must be True or False, not {self.binary_view!r}")
        if self.on_decode_error not in DECODE_ERRORS:
            raise ValueError(f"on_decode_error must be 'raise' or 'null', not {self.on_decode_error!r}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(map(repr, TRANSPORTS))}, "
                             f"not {self.transport!r}")
        # remote_storage: a store URI; None: the store the brokers name, when the topic is tiered
        # (bootstrap_servers only); False: never read the store
        remote = None if self.remote_storage is False else \
            remote_spec(self.remote_storage, self.storage_options)
        object.__setattr__(self, "remote", remote)
        check_source(self.data_dir, self.bootstrap_servers, remote)
        check_isolation(self.read_committed, self.data_dir, remote)
        if self.flight is not None and (not isinstance(self.flight, str) or "://" not in self.flight):
            raise ValueError(f"flight must be a URL such as 'grpc://broker:8815', not {self.flight!r}")
        if self.bootstrap_servers is None and (self.transport == "flight" or self.flight is not None):
            raise ValueError("transport='flight' and flight= read through brokers: pass bootstrap_servers=")
        output_columns(self.columns, self.include_headers)  # unknown names fail now
        object.__setattr__(self, "fetch", with_security(self.fetch_options, self.security))

    # set in __post_init__ (checked there); typed here
    remote: RemoteStorageSpec | None = field(init=False, repr=False, compare=False)
    fetch: Any = field(init=False, repr=False, compare=False)
    # what was learnt of the source once (the Flight address), shared by copies with the same source
    discovered: dict[str, Any] = field(init=False, repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any]) -> ReadOptions:
        """The options among a public function's arguments (its ``locals()``: the other names are
        its own, such as the topic)."""
        return cls(**{k: v for k, v in arguments.items() if k in _FIELDS})

    def replace(self, **changes: Any) -> ReadOptions:
        """These options with `changes` (checked again)."""
        out = dataclasses.replace(self, **changes)
        if not changes.keys() & _SOURCE_FIELDS:
            object.__setattr__(out, "discovered", self.discovered)
        return out

    @cached_property
    def output_columns(self) -> list[str]:
        return output_columns(self.columns, self.include_headers)

    def bounds(self) -> dict[str, Any]:
        """The read bounds, as `pylog.sdk.offsets.resolve_ranges` takes them."""
        return dict(starting_offsets=self.starting_offsets, ending_offsets=self.ending_offsets,
                    starting_timestamp=self.starting_timestamp, ending_timestamp=self.ending_timestamp)

    def decode_context(self, topic: str) -> dict[str, Any]:
        """What a ``"registry"`` decoder of `topic` needs to find its schemas."""
        return dict(topic=topic, data_dir=self.data_dir, bootstrap_servers=self.bootstrap_servers,
                    fetch_options=self.fetch, schema_registry_url=self.schema_registry_url,
                    on_decode_error=self.on_decode_error)

    def where(self) -> str:
        """The source, as messages name it."""
        if self.data_dir is not None:
            return f"data_dir {self.data_dir!r}"
        if self.bootstrap_servers is not None:
            return f"the cluster at {self.bootstrap_servers}"
        return f"remote_storage {self.remote_storage!r}"


_FIELDS = frozenset(f.name for f in dataclasses.fields(ReadOptions) if f.init)
_SOURCE_FIELDS = frozenset({"data_dir", "bootstrap_servers", "security", "fetch_options", "transport",
                            "flight"})


def check_source(data_dir: Any, bootstrap_servers: Any, remote: Any) -> None:
    """Exactly one of a data directory and bootstrap servers, or a remote store alone."""
    if (data_dir is not None and bootstrap_servers is not None) or \
            (data_dir is None and bootstrap_servers is None and remote is None):
        raise ValueError("pass exactly one of data_dir= (read a pylog data directory) or "
                         "bootstrap_servers= (read through the Kafka protocol), or remote_storage= "
                         "alone (read the remote tier from the object store)"
                         + ("; both were given" if data_dir is not None else "; neither was given"))


def check_isolation(read_committed: bool, data_dir: Any, remote: Any) -> None:
    """A read_uncommitted read (``read_committed=False``) needs a data directory alone."""
    if not read_committed and (data_dir is None or remote is not None):
        raise ValueError("read_committed=False reads a data directory alone (no bootstrap_servers, no "
                         "remote_storage)")


def with_security(fetch_options: Any, security: Any) -> Any:
    """``fetch_options`` carrying the Kafka client security settings (checked now, not at read time)."""
    if security is None:
        return fetch_options
    from pylog.sdk.client import client_security
    from pylog.sdk.kafka_source import FetchOptions

    return dataclasses.replace(fetch_options or FetchOptions(), security=client_security(security))
