"""Bootstrap records: metadata written before a cluster's first start (``kafka-storage format``'s
``--add-scram``), committed by the first active controller while the metadata log is still empty.

``pylog storage format --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'`` writes
them to ``bootstrap.checkpoint`` in the data directory, as JSON metadata records (the metadata log's
own encoding). Every controller of a new cluster is formatted with the same file; whichever is
elected first commits the records, and the others then find a log that is no longer empty.

A quorum whose voters live in the log (kraft.version 1) starts from the voter set formatting
writes (``--standalone``: this controller alone; ``--initial-controllers``: the listed ones, each
with its directory id) as the metadata log's first entry, a control entry of term 0 that every
initial controller holds identically (Kafka writes it as the bootstrap snapshot's control
records); a controller formatted with ``--no-initial-controllers`` starts with an empty log and
follows the quorum as an observer until it is added.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pylog.cluster.image import MetadataImage
from pylog.cluster.metadata_log import MetadataLogStore
from pylog.cluster.raft_types import Entry, Ready, Role
from pylog.cluster.records import MetadataRecord, RecordDecodeError, decode_records, encode_records
from pylog.cluster.voters import (
    KRAFT_VERSION_DYNAMIC,
    ControlBatch,
    Endpoint,
    VoterNode,
    VoterSet,
    encode_control,
    parse_directory_id,
)
from pylog.config import ConfigError

BOOTSTRAP_FILE = "bootstrap.checkpoint"


def write_bootstrap(data_dir: Path, records: Sequence[MetadataRecord]) -> Path:
    path = Path(data_dir) / BOOTSTRAP_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # credentials: owner only
    with os.fdopen(fd, "wb") as f:
        f.write(encode_records(records))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path


def read_bootstrap(data_dir: Path) -> list[MetadataRecord]:
    path = Path(data_dir) / BOOTSTRAP_FILE
    if not path.exists():
        return []
    try:
        return decode_records(path.read_bytes())
    except (OSError, RecordDecodeError) as exc:
        raise ConfigError(
            f"{path} is not a bootstrap file written by `pylog storage format`: {exc}"
        ) from None


def log_is_empty(image: MetadataImage) -> bool:
    """No record was ever applied (only Raft's empty entries), so bootstrap records are due."""
    return not image.to_records() and image.next_producer_id == 0 and image.last_broker_epoch == 0


def write_bootstrap_voters(data_dir: Path, voters: VoterSet) -> None:
    """Start the metadata log with kraft.version 1 and ``voters`` (a new controller's log only)."""
    store = MetadataLogStore(data_dir)
    try:
        if store.last_index > 0 or store.snapshot() is not None:
            raise ConfigError(f"{store.dir} already holds a metadata log")
        entry = Entry(0, 1, encode_control(ControlBatch(KRAFT_VERSION_DYNAMIC, voters)))
        store.save(Ready(None, (entry,), (), (), Role.FOLLOWER, None))
    finally:
        store.close()


def parse_initial_controllers(text: str, listener: str) -> VoterSet:
    """``--initial-controllers``: ``id@host:port:directory-id,...`` (Kafka's format)."""
    voters = []
    for item in (p.strip() for p in text.split(",") if p.strip()):
        node, sep, rest = item.partition("@")
        address, colon, dir_text = rest.rpartition(":")
        host, colon2, port = address.rpartition(":")
        try:
            if not sep or not colon or not colon2 or not host:
                raise ValueError
            endpoint = Endpoint(listener, host.strip("[]"), int(port))
            voters.append(VoterNode(int(node), parse_directory_id(dir_text), (endpoint,)))
        except ValueError:
            raise ConfigError(
                f"--initial-controllers entry {item!r} is not id@host:port:directory-id "
                "(e.g. 1@127.0.0.1:9093:pbvuBlaTTwKRxS5NLJwRFQ)"
            ) from None
    if not voters:
        raise ConfigError("--initial-controllers names no controller")
    try:
        return VoterSet(tuple(voters))
    except ValueError as exc:
        raise ConfigError(f"--initial-controllers: {exc}") from None
