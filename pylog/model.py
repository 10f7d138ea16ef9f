"""The small kernel protocol/ and storage/ share: what a Kafka record batch is, once.

The Arrow schema records have in memory and on disk (``RECORD_SCHEMA``), the attribute bits of a
RecordBatch v2 header, and Kafka's sentinel values. The codec builds batches of this schema, the
log stores them, the SDK reads them; each imports the definitions from here.

This module is a leaf: it imports pyarrow and nothing from pylog, so that ``pylog.protocol`` and
``pylog.storage``, which import nothing else from pylog, may import it.
"""

from __future__ import annotations

import pyarrow as pa

HEADER_STRUCT_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])

RECORD_SCHEMA = pa.schema(
    [
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(HEADER_STRUCT_TYPE)),
    ]
)
HEADERS_TYPE = RECORD_SCHEMA.field("headers").type
BINARY_VIEW_INLINE = 12  # Arrow binary_view: a value of at most this many bytes lives in its 16-byte view

# RecordBatch v2 attribute bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # LogAppendTime
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

# Kafka's sentinels
LONG_MAX = 2**63 - 1  # Long.MAX_VALUE: "no limit" in configs such as flush.ms
LONG_MIN = -(2**63)
INT16_MAX = 2**15 - 1
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
