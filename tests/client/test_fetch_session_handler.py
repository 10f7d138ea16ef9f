"""The fetcher's side of a fetch session (pylog.client.fetch_session): full then incremental
fetches naming only what moved, forgotten partitions, starting over on session errors."""

from __future__ import annotations

from pylog.protocol.errors import ErrorCode

from pylog.client.fetch_session import FetchSessionHandler


def fields(partition: int, offset: int) -> dict[str, int]:
    return {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1024}


def test_full_then_incremental_then_forgotten() -> None:
    h = FetchSessionHandler()
    wanted = {("t", p): fields(p, 0) for p in range(3)}
    first = h.build(wanted)
    assert (first.session_id, first.epoch, first.is_full) == (0, 0, True)
    assert list(first.to_send) == list(wanted)
    assert h.handle_response(0, 77, wanted)
    # nothing moved: an incremental fetch naming nothing
    second = h.build(wanted)
    assert (second.session_id, second.epoch, second.to_send, second.forgotten) == (77, 1, {}, [])
    assert h.handle_response(0, 77, [("t", 1)])
    # one position moved, one partition dropped, one added
    wanted = {("t", 0): fields(0, 5), ("t", 1): fields(1, 0), ("u", 0): fields(0, 0)}
    third = h.build(wanted)
    assert third.epoch == 2 and list(third.to_send) == [("t", 0), ("u", 0)] and third.forgotten == [("t", 2)]
    body = third.body()
    assert body["session_id"] == 77 and body["session_epoch"] == 2
    assert body["forgotten_topics_data"] == [{"topic": "t", "partitions": [2]}]
    assert [t["topic"] for t in body["topics"]] == ["t", "u"]


def test_session_errors_start_over() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): fields(0, 0)}
    h.build(wanted)
    h.handle_response(0, 5, wanted)
    h.build(wanted)
    assert not h.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    again = h.build(wanted)  # closes session 5, asks for a new one, names everything
    assert (again.session_id, again.epoch, list(again.to_send)) == (5, 0, [("t", 0)])
    h.handle_response(0, 6, wanted)
    h.build(wanted)
    assert not h.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    assert (h.build(wanted).session_id, h.epoch) == (0, 0)


def test_no_session_granted_means_full_fetches() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): fields(0, 0)}
    for _ in range(3):
        req = h.build(wanted)
        assert req.is_full and req.session_id == 0
        assert h.handle_response(0, 0, wanted)


def test_an_answer_that_does_not_fit_the_session_is_refused() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): fields(0, 0)}
    h.build(wanted)
    assert not h.handle_response(0, 9, [("t", 0), ("x", 3)])  # a full answer with an extra partition
    h.build(wanted)
    assert h.handle_response(0, 9, wanted)
    h.build(wanted)
    assert not h.handle_response(0, 9, [("y", 1)])  # an incremental one naming a stranger
    assert h.build(wanted).is_full


def test_close_and_lost_connection() -> None:
    h = FetchSessionHandler()
    wanted = {("t", 0): fields(0, 0)}
    assert h.close() is None
    h.build(wanted)
    h.handle_response(0, 3, wanted)
    h.build(wanted)
    h.handle_error()
    assert h.build(wanted).epoch == 0
    h.handle_response(0, 4, wanted)
    closing = h.close()
    assert closing is not None and (closing.session_id, closing.epoch, closing.to_send) == (4, -1, {})
