"""Consumer-group membership with each client: members share partitions evenly; a member that
leaves (LeaveGroup) or dies (session timeout) has its partitions moved to the others."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from compat_clients import create_topic, unique
from compat_groups import GROUP_CLIENTS, Member, wait_balanced

SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms
JOIN_TIMEOUT = 60.0
# After a kill the coordinator waits out the session timeout, then the survivors rejoin.
EXPIRY_TIMEOUT = SESSION_MS / 1000 + 30.0
pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.close()


def start(
    started: list[Member], client: str, broker: BrokerProcess, topic: str, group: str, tmp: Path
) -> Member:
    m = Member(client, broker.bootstrap, topic, group, tmp, SESSION_MS)
    started.append(m)
    return m


@pytest.mark.parametrize("client", GROUP_CLIENTS)
def test_three_members_share_six_partitions(
    broker: BrokerProcess,
    topic_name: str,
    client: str,
    members: list[Member],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if client == "kafkajs":
        request.getfixturevalue("kafkajs")
    create_topic(broker.bootstrap, topic_name, partitions=6)
    group = unique("g")
    trio = [start(members, client, broker, topic_name, group, tmp_path) for _ in range(3)]
    wait_balanced(trio, 6, JOIN_TIMEOUT)
    assert sorted(len(m.assignment or []) for m in trio) == [2, 2, 2]

    # A clean leave: the two others take over its partitions (3 + 3).
    trio[0].leave()
    wait_balanced(trio[1:], 6, JOIN_TIMEOUT)

    # A crash: no LeaveGroup; the coordinator expires the member after the session timeout.
    trio[1].kill()
    wait_balanced(trio[2:], 6, EXPIRY_TIMEOUT)
    assert trio[2].assignment == [0, 1, 2, 3, 4, 5]


def test_mixed_clients_in_one_group(
    broker: BrokerProcess, topic_name: str, members: list[Member], tmp_path: Path
) -> None:
    """kafka-python, confluent-kafka and aiokafka agree on the 'roundrobin' assignor, which the
    coordinator picks as the protocol every member supports."""
    create_topic(broker.bootstrap, topic_name, partitions=6)
    group = unique("mixed")
    trio = [
        start(members, c, broker, topic_name, group, tmp_path)
        for c in ("kafka-python", "confluent-kafka", "aiokafka")
    ]
    wait_balanced(trio, 6, JOIN_TIMEOUT)
    trio[1].kill()
    wait_balanced([trio[0], trio[2]], 6, EXPIRY_TIMEOUT)


def test_member_joining_later_gets_a_share(
    broker: BrokerProcess, topic_name: str, members: list[Member], tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=6)
    group = unique("late")
    first = start(members, "confluent-kafka", broker, topic_name, group, tmp_path)
    wait_balanced([first], 6, JOIN_TIMEOUT)
    second = start(members, "confluent-kafka", broker, topic_name, group, tmp_path)
    wait_balanced([first, second], 6, JOIN_TIMEOUT)
