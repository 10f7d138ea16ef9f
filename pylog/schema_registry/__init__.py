"""Confluent-compatible Schema Registry served by the broker, its state in the compacted
``_schemas`` topic.

Layers: `core` (sans-IO state machine: subjects, versions, ids, compatibility, modes) over
`formats` (Avro, Protobuf, JSON Schema parsing and compatibility); `store` (tail and append
``_schemas`` through the Kafka protocol); `service` (the image plus the single-writer rule);
`http` (Confluent's REST API on aiohttp); `validation` (the broker's produce-time check of the
wire format); `wire` (the magic byte and schema id framing).
"""
