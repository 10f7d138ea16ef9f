"""AlterClientQuotas on the controller (Kafka's ClientQuotaControlManager rules), the records it
commits, snapshots of them, and the DescribeClientQuotas filter (deterministic)."""

from __future__ import annotations

import random

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.cluster.controller import QuorumController
from pylog.cluster.image import MetadataImage
from pylog.cluster.quota_control import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    FilterComponent,
    QuotaAlteration,
    QuotaFilterError,
    QuotaOp,
    describe_quotas,
)
from pylog.cluster.records import ClientQuotaRecord, decode_records, encode_records

OK, INVALID = ErrorCode.NONE, ErrorCode.INVALID_REQUEST


def alter(c: QuorumController, committed: MetadataImage, *alts: QuotaAlteration, validate_only: bool = False):
    result = c.alter_client_quotas(list(alts), validate_only=validate_only)
    committed.apply_batch(decode_records(encode_records(result.records)), committed.offset + 1)
    return result


def set_(entity: tuple, **values: float) -> QuotaAlteration:
    return QuotaAlteration(entity, [QuotaOp(k, v) for k, v in values.items()])


def test_set_change_remove_and_snapshot() -> None:
    c, committed = QuorumController(rng=random.Random(1)), MetadataImage()
    r = alter(
        c,
        committed,
        set_((("client-id", "app"), ("user", "alice")), producer_byte_rate=1048576),
        set_((("user", None),), consumer_byte_rate=2e6, request_percentage=12.5),
        set_((("ip", "10.0.0.1"),), connection_creation_rate=10),
        set_((("ip", None),), connection_creation_rate=100),
    )
    assert [x.error_code for x in r.response] == [OK] * 4
    assert len(r.records) == 5
    # entities are stored sorted by type whatever order the request named them in
    assert committed.client_quotas[(("client-id", "app"), ("user", "alice"))] == {
        "producer_byte_rate": 1048576.0
    }
    assert committed.client_quotas[(("user", None),)] == {
        "consumer_byte_rate": 2e6,
        "request_percentage": 12.5,
    }
    assert c.image.client_quotas == committed.client_quotas
    # setting the value already set writes nothing; removing an unset key writes nothing
    r = alter(c, committed, set_((("user", "alice"), ("client-id", "app")), producer_byte_rate=1048576))
    assert r.records == () and r.response[0].error_code == OK
    none = QuotaAlteration((("user", None),), [QuotaOp("producer_byte_rate", 0, remove=True)])
    assert alter(c, committed, none).records == ()
    # removing the last key removes the entity
    gone = QuotaAlteration((("ip", "10.0.0.1"),), [QuotaOp("connection_creation_rate", 0, remove=True)])
    r = alter(c, committed, gone)
    assert r.records == (ClientQuotaRecord((("ip", "10.0.0.1"),), "connection_creation_rate", remove=True),)
    assert (("ip", "10.0.0.1"),) not in committed.client_quotas
    # a snapshot rebuilds the same quotas
    again = MetadataImage.from_records(
        committed.to_records(), offset=committed.offset, next_producer_id=0, last_broker_epoch=0
    )
    assert again == committed and again.client_quotas == committed.client_quotas
    assert committed.client_quota_generation > 0


@pytest.mark.parametrize(
    ("alteration", "message"),
    [
        (set_((), producer_byte_rate=1), "Invalid empty client quota entity"),
        (set_((("group", "g"),), producer_byte_rate=1), "Unhandled client quota entity type: group"),
        (set_((("user", ""),), producer_byte_rate=1), "Empty user not supported"),
        (
            set_((("ip", "10.0.0.1"), ("user", "a")), connection_creation_rate=1),
            "IP entity should not be combined",
        ),
        (set_((("ip", "not-an-address"),), connection_creation_rate=1), "is not a valid IP"),
        (
            set_((("user", "a"),), connection_creation_rate=1),
            "Invalid configuration key connection_creation_rate",
        ),
        (set_((("ip", None),), producer_byte_rate=1), "Invalid configuration key producer_byte_rate"),
        (set_((("user", "a"),), producer_byte_rate=0), "Quota producer_byte_rate must be greater than 0"),
        (set_((("user", "a"),), producer_byte_rate=10.5), "producer_byte_rate cannot be a fractional value."),
        (set_((("ip", None),), connection_creation_rate=2**31), "too large for an INT"),
        (
            QuotaAlteration(
                (("user", "a"),), [QuotaOp("request_percentage", 1), QuotaOp("request_percentage", 2)]
            ),
            "Duplicate quota key request_percentage",
        ),
    ],
)
def test_invalid_entities_and_values_fail_alone(alteration: QuotaAlteration, message: str) -> None:
    c, committed = QuorumController(rng=random.Random(1)), MetadataImage()
    good = set_((("client-id", "fine"),), request_percentage=1.5)  # a double: fractions allowed
    r = alter(c, committed, alteration, good)
    assert r.response[0].error_code == INVALID and message in (r.response[0].error_message or "")
    assert r.response[1].error_code == OK
    assert list(committed.client_quotas) == [(("client-id", "fine"),)]


def test_an_entity_named_twice_fails_and_validate_only_writes_nothing() -> None:
    c, committed = QuorumController(rng=random.Random(1)), MetadataImage()
    r = alter(
        c,
        committed,
        set_((("user", "a"), ("client-id", "b")), producer_byte_rate=1),
        set_((("client-id", "b"), ("user", "a")), producer_byte_rate=2),
    )
    assert len(r.response) == 1 and r.response[0].error_code == INVALID
    assert "duplicate entity" in (r.response[0].error_message or "")
    assert r.records == ()
    r = alter(c, committed, set_((("user", "a"),), producer_byte_rate=1), validate_only=True)
    assert r.response[0].error_code == OK and r.records == () and not committed.client_quotas


def test_an_inactive_controller_answers_not_controller() -> None:
    c = QuorumController(rng=random.Random(1), active=False)
    r = c.alter_client_quotas([set_((("user", "a"),), producer_byte_rate=1)])
    assert r.records == () and r.response[0].error_code == ErrorCode.NOT_CONTROLLER


QUOTAS = {
    (("user", "alice"),): {"producer_byte_rate": 1.0},
    (("user", None),): {"producer_byte_rate": 2.0},
    (("client-id", "app"), ("user", "alice")): {"consumer_byte_rate": 3.0},
    (("client-id", "app"),): {"request_percentage": 4.0},
    (("ip", None),): {"connection_creation_rate": 5.0},
}


def found(components: list[FilterComponent], strict: bool = False) -> list[tuple]:
    return sorted((e for e, _ in describe_quotas(QUOTAS, components, strict)), key=repr)


def test_describe_filters() -> None:
    assert len(found([])) == 5  # no components, not strict: everything
    assert found([], strict=True) == []
    alice = [FilterComponent("user", MATCH_EXACT, "alice")]
    assert found(alice) == sorted([(("user", "alice"),), (("client-id", "app"), ("user", "alice"))], key=repr)
    assert found(alice, strict=True) == [(("user", "alice"),)]
    assert found([FilterComponent("user", MATCH_DEFAULT, None)]) == [(("user", None),)]
    assert len(found([FilterComponent("user", MATCH_SPECIFIED, None)])) == 3
    assert found([FilterComponent("ip", MATCH_SPECIFIED, None)]) == [(("ip", None),)]
    assert found([FilterComponent("client-id", MATCH_SPECIFIED, None)], strict=True) == [
        (("client-id", "app"),)
    ]


@pytest.mark.parametrize(
    ("components", "code", "message"),
    [
        ([FilterComponent("", MATCH_EXACT, "a")], INVALID, "Invalid empty entity type."),
        (
            [FilterComponent("group", MATCH_EXACT, "a")],
            ErrorCode.UNSUPPORTED_VERSION,
            "Unsupported entity type",
        ),
        (
            [FilterComponent("user", MATCH_EXACT, None)],
            INVALID,
            "MATCH_TYPE_EXACT, but set match string to null",
        ),
        ([FilterComponent("user", MATCH_DEFAULT, "a")], INVALID, "MATCH_TYPE_DEFAULT, but also"),
        ([FilterComponent("user", MATCH_SPECIFIED, "a")], INVALID, "MATCH_TYPE_SPECIFIED, but also"),
        ([FilterComponent("user", 7, None)], INVALID, "Unknown match type 7"),
        (
            [FilterComponent("user", MATCH_SPECIFIED, None), FilterComponent("user", MATCH_EXACT, "a")],
            INVALID,
            "cannot appear more than once",
        ),
        (
            [FilterComponent("ip", MATCH_SPECIFIED, None), FilterComponent("user", MATCH_EXACT, "a")],
            INVALID,
            "IP filter component should not be used",
        ),
    ],
)
def test_describe_refuses_malformed_filters(
    components: list[FilterComponent], code: int, message: str
) -> None:
    with pytest.raises(QuotaFilterError, match=message) as exc:
        describe_quotas(QUOTAS, components, False)
    assert exc.value.code == code
