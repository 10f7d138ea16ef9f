"""``ImageFeed``: committed metadata entries applied to the image, and the listeners told of each.

Both ways a node follows the metadata log use it: a controller voter applies the entries its
Raft log commits (``MetadataQuorum``), a broker that is not a voter applies what it fetched from
the active controller (``MetadataObserver``). A snapshot replaces the whole image; listeners of
images hear of that, listeners of records of every record applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pylog.cluster.image import MetadataImage, TopicImage
from pylog.cluster.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RecordDecodeError,
    RemoveTopicRecord,
    TopicRecord,
    decode_records,
)
from pylog.cluster.snapshot import decode_image
from pylog.cluster.voters import ControlRecordError, VoterSet, decode_control, is_control

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MetadataChange:
    """One applied record. ``topic`` names the topic the record concerns, if any —
    for a RemoveTopicRecord, the topic as it was before removal."""

    record: MetadataRecord
    offset: int
    topic: TopicImage | None


MetadataListener = Callable[[MetadataChange], None]
ImageListener = Callable[[MetadataImage], None]


class ImageFeed:
    def __init__(self) -> None:
        self.image = MetadataImage()
        self._listeners: list[MetadataListener] = []
        self._image_listeners: list[ImageListener] = []
        self.apply_errors = 0
        # the quorum's voters as the log says (kraft.version 1; None: static or not seen yet)
        self.voters: VoterSet | None = None
        self.kraft_version = 0

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_image_listener(self, listener: ImageListener) -> None:
        self._image_listeners.append(listener)

    def restore(
        self,
        index: int,
        data: bytes,
        *,
        notify: bool = True,
        voters: VoterSet | None = None,
        kraft_version: int = 0,
    ) -> None:
        """Replace the image with a snapshot's (as of ``index``), and the voters with its own."""
        self.voters, self.kraft_version = voters, kraft_version
        image = decode_image(data)
        image.offset = index
        self.image = image
        if notify:
            for listener in self._image_listeners:
                try:
                    listener(image)
                except Exception:
                    log.exception("metadata image listener failed")

    def apply(self, index: int, data: bytes) -> None:
        """Apply one committed entry (empty data: a leader's no-op; a control entry: the voters)."""
        if is_control(data):
            try:
                batch = decode_control(data)
            except ControlRecordError:
                log.exception("undecodable control entry at offset %d", index)
                self.apply_errors += 1
            else:
                self.voters = batch.voters if batch.voters is not None else self.voters
                if batch.kraft_version is not None:
                    self.kraft_version = batch.kraft_version
        elif data:
            try:
                records = decode_records(data)
            except RecordDecodeError:
                log.exception("undecodable metadata entry at offset %d", index)
                self.apply_errors += 1
                records = []
            for r in records:
                topic = self._topic_before(r)
                try:
                    self.image.apply(r)
                except Exception:  # whatever the reason: logged and counted, the log goes on
                    log.exception("metadata record at offset %d does not apply: %r", index, r)
                    self.apply_errors += 1
                    continue
                change = MetadataChange(r, index, topic if topic is not None else self._topic_after(r))
                for listener in self._listeners:
                    try:
                        listener(change)
                    except Exception:
                        log.exception("metadata listener failed on %r", r)
        self.image.remote.stamp(index)  # versions the partitions whose remote segments changed
        self.image.offset = index

    def _topic_before(self, r: MetadataRecord) -> TopicImage | None:
        return self.image.topic(r.topic_id) if isinstance(r, RemoveTopicRecord) else None

    def _topic_after(self, r: MetadataRecord) -> TopicImage | None:
        if isinstance(r, (TopicRecord, PartitionRecord, PartitionChangeRecord)):
            return self.image.topic(r.topic_id)
        if isinstance(r, ConfigRecord) and r.resource_type == ConfigResourceType.TOPIC:
            return self.image.topic(r.resource_name)
        return None
