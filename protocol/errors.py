"""Exceptions for malformed wire input; Kafka error codes travel as data, these close connections."""

from __future__ import annotations


class ProtocolError(Exception):
    """Malformed input on the wire."""


class FrameTooLarge(ProtocolError):
    """A size prefix announces a frame larger than the configured limit."""


class MalformedMessage(ProtocolError):
    """A request or response does not follow its schema."""


class CorruptRecordBatch(ProtocolError):
    """A record batch has a bad CRC or a broken structure."""


class RecordBatchTooLarge(ProtocolError):
    """A record batch decompresses past the allowed bound."""


class UnsupportedApi(ProtocolError):
    """Unknown API key or unsupported version."""
