"""Kafka RecordBatch v2 <-> Apache Arrow (``RECORD_SCHEMA``), sans-IO.

The per-record work runs in the C accelerator ``_crecords`` when it was built, else in its
pure-Python twin ``_pyrecords``; ``PYLOG_PURE_PYTHON=1`` forces the twin. Both are exposed
(``C_IMPL``, ``PYTHON_IMPL``) and every decode/encode function takes ``impl=`` for tests.

Only magic 2 is read. The legacy MessageSet formats (magic 0 and 1) are not: no client we
serve sends them to a broker that advertises Produce >= 3, Kafka 4 dropped them too, and the
Produce 0-2 / Fetch 0-3 versions that carry them are answered with UNSUPPORTED_VERSION.
"""

from pylog.model import NO_TIMESTAMP, RECORD_SCHEMA

from .batch import (
    C_IMPL,
    DEFAULT_MAX_UNCOMPRESSED_BYTES,
    IMPLEMENTATION,
    PYTHON_IMPL,
    DecodedBatch,
    decode_batch,
    decode_records,
    decode_section,
    encode_batch,
)
from .control import ControlRecord, ControlType, encode_control_batch, parse_control_record
from .header import (
    HEADER_SIZE,
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
    "decode_section",
    "encode_batch",
    "encode_control_batch",
    "iter_batches",
    "parse_control_record",
    "parse_header",
    "set_base_offset",
]
