"""Metadata snapshots: the image as of an offset, as bytes a Raft snapshot carries.

The payload is JSON, like the log's entries: ``{"offset", "next_producer_id",
"last_broker_epoch", "records": [...]}`` where the records rebuild the image when applied to an
empty one (``MetadataImage.to_records``). Snapshot plus the log after it replays to the same
image as the whole log.
"""

from __future__ import annotations

import json

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import RecordDecodeError, record_from_dict, record_to_dict


def encode_image(image: MetadataImage) -> bytes:
    body = {
        "offset": image.offset,
        "next_producer_id": image.next_producer_id,
        "last_broker_epoch": image.last_broker_epoch,
        "records": [record_to_dict(r) for r in image.to_records()],
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode_image(data: bytes) -> MetadataImage:
    """The image a snapshot holds; raises RecordDecodeError when the bytes are not one."""
    try:
        body = json.loads(data)
        records = [record_from_dict(d) for d in body["records"]]
        return MetadataImage.from_records(
            records,
            offset=int(body["offset"]),
            next_producer_id=int(body["next_producer_id"]),
            last_broker_epoch=int(body["last_broker_epoch"]),
        )
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise RecordDecodeError(f"not a metadata snapshot: {exc}") from exc
