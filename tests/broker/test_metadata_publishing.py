"""Publishing applied metadata never holds the event loop for a whole large entry: past one slice
of a loop turn, the rest of an entry's records are published on later turns, in order, so other
work (the node's heartbeats, Raft ticks) runs in between. Deterministic: a zero-length slice
publishes one record per turn."""

from __future__ import annotations

import asyncio
import uuid

from pylog.broker.control.metadata import BrokerMetadata
from pylog.cluster.image import MetadataImage
from pylog.cluster.image_feed import ImageFeed, MetadataChange
from pylog.cluster.records import PartitionRecord, RemoveTopicRecord, TopicRecord, encode_records


class Recorder:
    """A publisher noting what it was told and how many loop turns had passed by then."""

    def __init__(self, turns: list[int]) -> None:
        self.turns = turns
        self.seen: list[tuple[str, int, int, bool]] = []  # (record type, partition, turn, in image)

    def on_image_loaded(self, image: MetadataImage) -> None:
        pass

    def reconcile(self, image: MetadataImage):  # type: ignore[no-untyped-def]
        yield

    def on_change(self, change: MetadataChange, image: MetadataImage) -> None:
        r = change.record
        index = getattr(r, "partition_id", -1)
        present = index < 0 or image.partition(r.topic_id, index) is not None  # type: ignore[union-attr]
        self.seen.append((type(r).__name__, index, self.turns[0], present))


def test_a_large_entry_is_published_in_order_over_many_loop_turns() -> None:
    async def run() -> tuple[list[tuple[str, int, int, bool]], int]:
        turns = [0]
        loop = asyncio.get_running_loop()

        def tick() -> None:  # stands for the heartbeat and the Raft tick: once per loop turn
            turns[0] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        feed = ImageFeed()
        metadata = BrokerMetadata(feed, "cluster", slice_s=0.0)  # type: ignore[arg-type]
        recorder = Recorder(turns)
        metadata.add_publisher(recorder)
        await metadata.start_publishing()
        tid = uuid.uuid4()
        records = [TopicRecord("t", tid)] + [PartitionRecord(tid, p, (1,), (1,), 1) for p in range(50)]
        feed.apply(1, encode_records(records))
        published_at_once = len(recorder.seen)
        while len(recorder.seen) < len(records):
            await asyncio.sleep(0)
        feed.apply(2, encode_records([RemoveTopicRecord(tid)]))
        while len(recorder.seen) < len(records) + 1:
            await asyncio.sleep(0)
        return recorder.seen, published_at_once

    seen, at_once = asyncio.run(run())
    assert at_once == 1  # the first record of the turn; the other 50 wait for later turns
    assert [(kind, index) for kind, index, _, _ in seen] == (
        [("TopicRecord", -1)] + [("PartitionRecord", p) for p in range(50)] + [("RemoveTopicRecord", -1)]
    )
    turns = [turn for _, _, turn, _ in seen[:51]]
    assert turns == sorted(set(turns))  # one record a turn: other work ran between any two
    assert all(present for _, _, _, present in seen[:51])
