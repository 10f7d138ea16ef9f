"""Bootstrap records: metadata written before a cluster's first start (``kafka-storage format``'s
``--add-scram``), committed by the first active controller while the metadata log is still empty.

``pylog storage format --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'`` writes
them to ``bootstrap.checkpoint`` in the data directory, as JSON metadata records (the metadata log's
own encoding). Every controller of a new cluster is formatted with the same file; whichever is
elected first commits the records, and the others then find a log that is no longer empty.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import MetadataRecord, RecordDecodeError, decode_records, encode_records
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
