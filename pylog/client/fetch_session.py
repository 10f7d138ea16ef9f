"""Incremental fetch sessions, the fetcher's side (KIP-227; Kafka's FetchSessionHandler): what a
fetcher that fetches the same partitions from one broker over and over sends, so that each Fetch
names only what changed. Used by pylog's consumers (``pylog.sdk``) and by the broker's replica
fetcher alike.

The first Fetch is full (session id 0, epoch 0: it names every partition and asks for a
session). A broker that grants one answers its id; from then on each Fetch carries that id and
the next epoch (1, 2, ..., wrapping to 1) and names only the partitions added or whose request
fields (fetch offset, max bytes, epochs, log start) differ from what was last sent; those no
longer wanted go in ``forgotten_topics_data``. The broker then answers only the partitions with
something new: a partition absent from an incremental answer has nothing new. A session error
(FETCH_SESSION_ID_NOT_FOUND: start afresh; INVALID_FETCH_SESSION_EPOCH or any other error, a
lost connection included: close the session and start afresh) leads to a full fetch again. A
broker that grants no session (id 0: librdkafka-era brokers, a full cache) gets a full fetch each
time.

A core: no I/O, no clock. Partitions are ``(topic, partition)`` keys with their request fields
as the Fetch body's partition entries (dicts: ``{"partition": ..., "fetch_offset": ..., ...}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
# the top-level Fetch errors that only end a session (the next Fetch is full)
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)

TopicPartition = tuple[str, int]
PartitionFields = Mapping[str, Any]  # one Fetch body partition entry


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: FINAL stays FINAL, the largest int32 wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(frozen=True)
class FetchRequestData:
    """What one Fetch sends: its session fields and the partitions it names."""

    session_id: int
    epoch: int
    to_send: dict[TopicPartition, PartitionFields]
    forgotten: list[TopicPartition]

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def body(self) -> dict[str, Any]:
        """The Fetch body's session fields, ``topics`` and ``forgotten_topics_data``."""
        topics: dict[str, list[PartitionFields]] = {}
        for (topic, _), fields in self.to_send.items():
            topics.setdefault(topic, []).append(fields)
        forgotten: dict[str, list[int]] = {}
        for topic, partition in self.forgotten:
            forgotten.setdefault(topic, []).append(partition)
        return {
            "session_id": self.session_id,
            "session_epoch": self.epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
        }


class FetchSessionHandler:
    """The session of one fetcher with one broker."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[TopicPartition, PartitionFields] = {}  # the session's partitions, as last sent
        self.full_fetches = 0
        self.incremental_fetches = 0

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def build(self, wanted: Mapping[TopicPartition, PartitionFields]) -> FetchRequestData:
        """The next Fetch for ``wanted`` (every partition to fetch, with its request fields)."""
        if self.is_full:
            self._sent = dict(wanted)
            self.full_fetches += 1
            return FetchRequestData(self.session_id, self.epoch, dict(wanted), [])
        sent = self._sent
        to_send = {tp: fields for tp, fields in wanted.items() if sent.get(tp) != fields}
        forgotten = [tp for tp in sent if tp not in wanted]
        self._sent = dict(wanted)
        self.incremental_fetches += 1
        return FetchRequestData(self.session_id, self.epoch, to_send, forgotten)

    def handle_response(self, error_code: int, session_id: int, partitions: Iterable[TopicPartition]) -> bool:
        """Take a Fetch answer (its top-level error, session id and the partitions it carries):
        whether its partitions can be used (False: a session error, or an answer that does not fit
        the session; the next Fetch is full)."""
        if error_code:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._start_over()
            else:
                self._close_existing()
            return False
        if self.is_full:
            if set(partitions) != set(self._sent):
                self._close_existing()
                return False
            if session_id == INVALID_SESSION_ID:
                self._start_over()  # no session granted: a full fetch again next time
            else:
                self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
            return True
        if not set(partitions) <= set(self._sent):
            self._close_existing()
            return False
        if session_id == INVALID_SESSION_ID:
            self._start_over()  # the broker closed the session
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def close(self) -> FetchRequestData | None:
        """The Fetch that closes the session when the fetcher is done (epoch FINAL, no partitions),
        so it does not hold a slot of the broker's cache until evicted; None without a session."""
        if self.session_id == INVALID_SESSION_ID:
            return None
        request = FetchRequestData(self.session_id, FINAL_EPOCH, {}, [])
        self._start_over()
        self._sent = {}
        return request

    def handle_error(self) -> None:
        """The Fetch got no answer (a lost connection, a timeout): the broker may have taken it,
        so the session's epoch is unknown; close it and start afresh."""
        self._close_existing()

    def _start_over(self) -> None:
        self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH

    def _close_existing(self) -> None:
        """Kafka's nextCloseExisting: the next Fetch is full, closes this session and asks for a
        new one."""
        self.epoch = INITIAL_EPOCH
