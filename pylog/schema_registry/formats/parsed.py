"""What every schema format module shares: the format names and a parsed schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AVRO, PROTOBUF, JSON = "AVRO", "PROTOBUF", "JSON"
SCHEMA_TYPES = (AVRO, PROTOBUF, JSON)


@dataclass(frozen=True)
class ParsedSchema:
    schema_type: str
    canonical: str  # the text the registry stores and compares (normalised as the format allows)
    parsed: Any = field(compare=False, repr=False)
