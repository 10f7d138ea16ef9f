"""Broker-side schema validation of produced records (topic configs
``confluent.value.schema.validation`` / ``confluent.key.schema.validation``, as Confluent Server
names them): every key / value of a batch must be in the wire format with a schema id the registry
knows, or the batch is refused with INVALID_RECORD and a message saying which record and why.

The check is columnar: the batch is decoded to Arrow once and the magic bytes and ids are read
through the offsets buffer (`wire.schema_ids`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from pylog.protocol.records import decode_batch, iter_batches
from pylog.schema_registry.wire import schema_ids

VALUE_VALIDATION = "confluent.value.schema.validation"
KEY_VALIDATION = "confluent.key.schema.validation"


class SchemaValidation:
    """``check(topic, configs, records) -> None | reason``. `known_ids` tells which ids exist (None: the
    broker serves no registry, so a topic asking for validation refuses everything)."""

    def __init__(self, known_ids: Callable[[np.ndarray], np.ndarray] | None) -> None:
        self.known_ids = known_ids

    def check(self, topic: str, configs: Mapping[str, str], data: bytes | memoryview | None) -> str | None:
        if KEY_VALIDATION not in configs and VALUE_VALIDATION not in configs:
            return None  # the common topic: nothing to look at (this runs once per produced batch)
        columns = [
            c
            for c, name in (("key", KEY_VALIDATION), ("value", VALUE_VALIDATION))
            if str(configs.get(name, "false")).lower() == "true"
        ]
        if not columns or not data:
            return None
        if self.known_ids is None:
            return (
                f"topic {topic} requires schema validation but this broker serves no schema registry "
                "(set schema.registry.listeners)"
            )
        index = 0
        for _header, view in iter_batches(data):
            batch = decode_batch(view).records
            for column in columns:
                ids, framed = schema_ids(batch.column(column))
                bad = np.flatnonzero(~framed)
                if bad.size:
                    return (
                        f"record {index + int(bad[0])} of the batch: the {column} is not in the schema "
                        f"registry wire format (magic byte 0 and a 4-byte schema id), as topic {topic} "
                        "requires"
                    )
                unknown = np.flatnonzero(~self.known_ids(ids))
                if unknown.size:
                    i = int(unknown[0])
                    return (
                        f"record {index + i} of the batch: the {column} carries schema id {int(ids[i])}, "
                        "which the schema registry does not know"
                    )
            index += batch.num_rows
        return None


def known_ids_of(by_id: Mapping[int, object]) -> Callable[[np.ndarray], np.ndarray]:
    def known(ids: np.ndarray) -> np.ndarray:
        unique = np.unique(ids)
        ok = {int(i) for i in unique if int(i) in by_id}
        return np.isin(ids, np.fromiter(ok, np.int64, len(ok)))

    return known
