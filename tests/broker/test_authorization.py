"""Every API a client can send, as a user without ACLs, over a real SASL listener of an in-process
broker: each answers the authorization error Kafka answers (table-driven), and listings leave out
what the user may not describe. The same requests as a super user are served."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from authorization_cases import CASES, TOPIC, ZERO, T
from harness import BrokerThread
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.cluster.channel import node_channel
from pylog.security.client import ClientSecurity

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_eve="eve-secret" user_root="root-secret";'
)
E = ErrorCode


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    b = BrokerThread(
        tmp_path_factory.mktemp("authz") / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:root",
        },
    ).start()
    yield b
    b.stop()


def call(b: BrokerThread, user: str, requests: list[tuple[int, int, dict]]) -> list[Any]:
    assert b.broker is not None
    port = next(s.port for s in b.broker.servers if s.listener == "SASL_PLAINTEXT")
    security = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": f"{user}-secret",
        }
    )

    async def run() -> list[Any]:
        ch = node_channel("127.0.0.1", port, client_id=f"authz-{user}", security=security)
        try:
            return [await ch.request(k, v, body, 15) for k, v, body in requests]
        finally:
            ch.close()

    return asyncio.run(run())


def codes(body: Any) -> set[int]:
    """Every error code in a decoded response."""
    out: set[int] = set()
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        for name in getattr(node, "_fields", ()):
            value = getattr(node, name)
            if name in ("error_code", "partition_error_code") and isinstance(value, int):
                out.add(value)
            elif isinstance(value, list) or hasattr(value, "_fields"):
                stack.append(value)
    return out


def test_every_api_answers_its_authorization_error(broker: BrokerThread) -> None:
    assert broker.broker is not None
    call(
        broker,
        "root",
        [
            (
                ApiKey.CREATE_TOPICS,
                5,
                {"topics": [{"name": T, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000},
            )
        ],
    )
    answers = call(broker, "eve", [(k, v, body) for _, k, v, body, _ in CASES])
    wrong = {
        name: sorted(codes(a)) for (name, _, _, _, want), a in zip(CASES, answers) if want not in codes(a)
    }
    assert not wrong, f"APIs that did not answer their authorization error: {wrong}"


def test_listings_leave_out_what_the_user_may_not_describe(broker: BrokerThread) -> None:
    call(
        broker,
        "root",
        [
            (
                ApiKey.CREATE_TOPICS,
                5,
                {
                    "topics": [{"name": "listed", "num_partitions": 1, "replication_factor": 1}],
                    "timeout_ms": 5000,
                },
            )
        ],
    )
    md, groups, txns, cluster = call(
        broker,
        "eve",
        [
            (ApiKey.METADATA, 9, {"topics": None, "include_cluster_authorized_operations": True}),
            (ApiKey.LIST_GROUPS, 4, {"states_filter": []}),
            (ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []}),
            (ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True}),
        ],
    )
    assert md.topics == [] and md.cluster_authorized_operations == 0
    assert groups.groups == [] and txns.transaction_states == []
    assert cluster.cluster_authorized_operations == 0
    # DescribeLogDirs v1 has no top-level error: Kafka answers it with no directory
    (dirs,) = call(broker, "eve", [(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})])
    assert dirs.results == []
    (dirs,) = call(broker, "root", [(ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None})])
    assert [r.error_code for r in dirs.results] == [0] and dirs.results[0].log_dir
    (root_md,) = call(
        broker,
        "root",
        [(ApiKey.METADATA, 9, {"topics": None, "include_cluster_authorized_operations": True})],
    )
    assert "listed" in {t.name for t in root_md.topics} and root_md.cluster_authorized_operations > 0


def test_a_topic_asked_by_id_that_the_user_may_not_describe(broker: BrokerThread) -> None:
    """Ids are not secret: Kafka answers TOPIC_AUTHORIZATION_FAILED with the id and no name."""
    created = call(
        broker,
        "root",
        [
            (
                ApiKey.CREATE_TOPICS,
                7,
                {
                    "topics": [{"name": "by-id", "num_partitions": 1, "replication_factor": 1}],
                    "timeout_ms": 5000,
                },
            )
        ],
    )[0]
    tid = created.topics[0].topic_id
    ask = {"topics": [{"name": "", "topic_id": tid}], "allow_auto_topic_creation": False}
    (md,) = call(broker, "eve", [(ApiKey.METADATA, 12, ask)])
    assert [(t.error_code, t.name, t.topic_id) for t in md.topics] == [(TOPIC, None, tid)]
    (md,) = call(broker, "root", [(ApiKey.METADATA, 12, ask)])
    assert [(t.error_code, t.name) for t in md.topics] == [(0, "by-id")]


def test_the_super_user_is_served(broker: BrokerThread) -> None:
    answers = call(
        broker,
        "root",
        [
            (
                ApiKey.DESCRIBE_CONFIGS,
                3,
                {
                    "resources": [
                        {"resource_type": 4, "resource_name": "1", "configuration_keys": ["super.users"]}
                    ]
                },
            ),
            (
                ApiKey.DESCRIBE_ACLS,
                2,
                {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1, "permission_type": 1},
            ),
            (ApiKey.INIT_PRODUCER_ID, 3, {"transactional_id": None, "transaction_timeout_ms": 60000}),
        ],
    )
    assert all(codes(a) <= {0} for a in answers), [sorted(codes(a)) for a in answers]


def test_sasl_requests_after_authentication_and_on_plaintext(broker: BrokerThread) -> None:
    (again,) = call(broker, "eve", [(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b""})])
    assert again.error_code == E.ILLEGAL_SASL_STATE
    from harness import Client

    assert broker.broker is not None
    plain = Client(broker.address)
    try:
        assert (
            plain.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == E.ILLEGAL_SASL_STATE
        )
    finally:
        plain.close()


def test_any_client_may_ask_for_its_telemetry_subscription(broker: BrokerThread) -> None:
    """Kafka authorizes neither GetTelemetrySubscriptions nor PushTelemetry."""
    (answer,) = call(broker, "eve", [(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO})])
    assert answer.error_code == 0 and answer.client_instance_id != ZERO
