"""Kafka RecordBatch v2 <-> Apache Arrow (``RECORD_SCHEMA``), sans-IO.

The per-record work runs in the C accelerator ``_crecords`` when it was built, else in its
pure-Python twin ``_pyrecords``; ``PYLOG_PURE_PYTHON=1`` forces the twin. Both are exposed
(``C_IMPL``, ``PYTHON_IMPL``) and every decode/encode function takes ``impl=`` for tests.
"""

from .batch import (
    C_IMPL,
    DEFAULT_MAX_UNCOMPRESSED_BYTES,
    IMPLEMENTATION,
    PYTHON_IMPL,
    RECORD_SCHEMA,
    DecodedBatch,
    decode_batch,
    decode_records,
    encode_batch,
)
from .control import ControlRecord, ControlType, encode_control_batch, parse_control_record
from .header import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    compute_crc,
    iter_batches,
    parse_header,
    set_base_offset,
)

__all__ = [
    "C_IMPL",
    "DEFAULT_MAX_UNCOMPRESSED_BYTES",
    "HEADER_SIZE",
    "IMPLEMENTATION",
    "NO_TIMESTAMP",
    "PYTHON_IMPL",
    "RECORD_SCHEMA",
    "BatchHeader",
    "ControlRecord",
    "ControlType",
    "DecodedBatch",
    "compute_crc",
    "decode_batch",
    "decode_records",
    "encode_batch",
    "encode_control_batch",
    "iter_batches",
    "parse_control_record",
    "parse_header",
    "set_base_offset",
]
