"""Records of the ``_schemas`` topic, in Confluent's JSON key / value format, so that Confluent's
tooling and pylog read the same topic.

Keys: ``{"keytype": "SCHEMA", "subject": s, "version": v, "magic": 1}``,
``{"keytype": "CONFIG" | "MODE", "subject": s or null, "magic": 0}``. A null value deletes the key
(a hard-deleted version, a removed config). The topic is compacted: the latest value per key is the
state.
"""

from __future__ import annotations

import json
from typing import Any

TOPIC = "_schemas"
SCHEMA, CONFIG, MODE, NOOP, DELETE_SUBJECT = "SCHEMA", "CONFIG", "MODE", "NOOP", "DELETE_SUBJECT"
# pylog's own: where the registry of broker `node` serves (non-writers forward writes there)
INSTANCE = "PYLOG_REGISTRY"
TOPIC_CONFIGS = {"cleanup.policy": "compact"}

Record = tuple[bytes, "bytes | None"]


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": MODE, "subject": subject, "magic": 0})


def instance_key(node_id: int) -> bytes:
    return _dumps({"keytype": INSTANCE, "node": node_id, "magic": 0})


def encode_value(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else _dumps(value)


def decode(key: bytes | None, value: bytes | None) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """(key, value) as dicts, or None for a record that is not one of the registry's."""
    if not key:
        return None
    try:
        k = json.loads(key)
        v = json.loads(value) if value else None
    except ValueError:
        return None
    if not isinstance(k, dict) or "keytype" not in k or (v is not None and not isinstance(v, dict)):
        return None
    return k, v
