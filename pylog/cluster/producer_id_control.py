"""The controller's producer id command: AllocateProducerIds hands a broker the next block of
producer ids (Kafka's ProducerIdControlManager). Sans-IO; kept apart from ``controller`` as the
other request families are.

A block is committed as a ``ProducerIdsRecord`` naming the next free id, so no two brokers (nor
one broker before and after a restart) ever hand out the same producer id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import MetadataRecord, ProducerIdsRecord
from pylog.model import LONG_MAX
from pylog.protocol.errors import ErrorCode


@dataclass(frozen=True)
class ProducerIdsResult:
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    first_producer_id: int = -1
    count: int = 0


class ProducerIdControl:
    def __init__(
        self, image: Callable[[], MetadataImage], collect: Callable[[list[MetadataRecord]], None]
    ) -> None:
        self._image = image
        self._collect = collect

    def allocate(self, broker_id: int, broker_epoch: int, count: int) -> ProducerIdsResult:
        """The next block of ``count`` ids for ``broker_id``; a ``broker_epoch`` of -1 skips the
        epoch check (the broker of a single-node install)."""
        image = self._image()
        if broker_epoch != -1:
            b = image.brokers.get(broker_id)
            if b is None or b.broker_epoch != broker_epoch:
                return ProducerIdsResult(ErrorCode.STALE_BROKER_EPOCH, f"Stale broker epoch {broker_epoch}")
        if count <= 0:
            return ProducerIdsResult(ErrorCode.INVALID_REQUEST, "Count must be positive")
        first = image.next_producer_id
        if first + count > LONG_MAX:
            return ProducerIdsResult(ErrorCode.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds")
        self._collect([ProducerIdsRecord(broker_id, broker_epoch, first + count)])
        return ProducerIdsResult(first_producer_id=first, count=count)
