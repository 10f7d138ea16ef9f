"""Round-trip property tests: every message of every version, values drawn from its own schema."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from protocol_strategies import message_strategy
from pylog.protocol.api import MESSAGES, decode_body, encode_body

_CASES = [
    (name, v)
    for name, spec in sorted(MESSAGES.items())
    if spec.valid_versions is not None
    for v in range(spec.valid_versions[0], spec.valid_versions[1] + 1)
]

_SETTINGS = settings(
    max_examples=6,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_every_definition_is_covered() -> None:
    kinds = {spec.kind for spec in MESSAGES.values()}
    assert {"request", "response", "header", "data"} <= kinds
    assert len(_CASES) > 400


@pytest.mark.parametrize(("name", "version"), _CASES, ids=[f"{n}-v{v}" for n, v in _CASES])
def test_round_trip(name: str, version: int) -> None:
    spec = MESSAGES[name]

    @_SETTINGS
    @given(message_strategy(spec, version))
    def check(obj: object) -> None:
        raw = b"".join(encode_body(spec, version, obj))
        decoded, end = decode_body(spec, version, memoryview(raw))
        assert end == len(raw)
        assert decoded == obj
        # canonical: re-encoding what was decoded gives the same bytes
        assert b"".join(encode_body(spec, version, decoded)) == raw
        # the same value given as plain dicts encodes identically
        assert b"".join(encode_body(spec, version, obj.to_dict())) == raw

    check()
