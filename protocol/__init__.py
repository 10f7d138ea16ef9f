"""Kafka wire protocol, sans-IO: frames, headers, schema-driven messages, error codes.

`pylog.protocol.api` holds the entry points (decode_request, encode_response, ...),
`pylog.protocol.framing` the FrameReader, `pylog.protocol.errors` ErrorCode and the
exceptions; record batches live in `pylog.protocol.records`.
"""
