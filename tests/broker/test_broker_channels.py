"""``BrokerChannels``, the connections the replica fetchers and the transaction-marker sender use,
against a real in-process broker with a SASL listener beside its PLAINTEXT one: the channel goes
to the broker's inter-broker listener as the metadata image registers it, with the inter-broker
credentials; a request past its timeout drops the connection and the next request connects
again; a broker registered again on another address gets a new channel; closing (broker
shutdown) fails what is in flight and refuses further requests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from harness import BrokerThread
from pylog.protocol.api import ApiKey

from pylog.broker.control.broker_channels import BrokerChannels
from pylog.client.errors import ConnectFailed, RequestTimedOut, TransportError
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import BrokerEndpoint, RegisterBrokerRecord
from pylog.security.client import ClientSecurity

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_peer="peer-secret";'
LEADER = 7
TOPIC = "channels"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    b = BrokerThread(
        tmp_path_factory.mktemp("channels") / "data",
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        },
    ).start()
    yield b
    b.stop()


def ports(b: BrokerThread) -> dict[str, int]:
    assert b.broker is not None
    return {s.listener: s.port for s in b.broker.servers}


def image_with(port_of: dict[str, int], epoch: int = 1) -> MetadataImage:
    """An image in which broker LEADER is registered on ``port_of``'s listeners."""
    image = MetadataImage()
    endpoints = tuple(BrokerEndpoint(name, "127.0.0.1", port) for name, port in port_of.items())
    image.apply(RegisterBrokerRecord(LEADER, uuid.uuid4(), epoch, endpoints, fenced=False))
    return image


def peer(password: str = "peer-secret") -> ClientSecurity:
    return ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "peer",
            "sasl.password": password,
        }
    )


def channels_to(image: list[MetadataImage], security: ClientSecurity) -> BrokerChannels:
    return BrokerChannels(1, "SASL_PLAINTEXT", lambda: image[0], security, client_id="pylog-replica-1")


METADATA: dict[str, Any] = {"topics": [], "allow_auto_topic_creation": False}


def long_poll(max_wait_ms: int) -> dict[str, Any]:
    """A Fetch that the broker holds for ``max_wait_ms`` (nothing to read at offset 0)."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                     "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_inter_broker_listener_credentials_timeout_and_reconnect(broker: BrokerThread) -> None:
    port_of = ports(broker)

    async def run() -> None:
        channels = channels_to([image_with(port_of)], peer())
        try:
            assert channels.get(LEADER + 1) is None  # not registered: nothing to connect to
            ch = channels.get(LEADER)
            assert ch is not None and ch.port == port_of["SASL_PLAINTEXT"]
            assert channels.get(LEADER) is ch
            created = await ch.request(ApiKey.CREATE_TOPICS, 7, {
                "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                            "assignments": [], "configs": []}], "timeout_ms": 5000}, 10)
            assert created.topics[0].error_code in (0, 36)  # created, or already there
            assert (await ch.request(ApiKey.METADATA, 12, METADATA, 10)).brokers
            first = await ch.connection()
            with pytest.raises(RequestTimedOut):
                await ch.request(ApiKey.FETCH, 12, long_poll(5000), 0.3)
            assert first.closed  # an unanswered request drops the connection ...
            resp = await ch.request(ApiKey.FETCH, 12, long_poll(0), 10)  # ... the next one reconnects
            assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0
            assert await ch.connection() is not first
        finally:
            channels.close()

    asyncio.run(run())


def test_refused_credentials_are_a_transport_error(broker: BrokerThread) -> None:
    async def run() -> None:
        channels = channels_to([image_with(ports(broker))], peer("wrong"))
        try:
            ch = channels.get(LEADER)
            assert ch is not None
            with pytest.raises(ConnectFailed, match="refused the SASL credentials"):
                await ch.request(ApiKey.METADATA, 12, METADATA, 10)
        finally:
            channels.close()

    asyncio.run(run())


def test_a_new_address_gets_a_new_channel_and_close_refuses_requests(broker: BrokerThread) -> None:
    port_of = ports(broker)

    async def run() -> None:
        image = [image_with({"SASL_PLAINTEXT": port_of["PLAINTEXT"]})]
        channels = channels_to(image, peer())
        old = channels.get(LEADER)
        assert old is not None and old.port == port_of["PLAINTEXT"]
        image[0] = image_with(port_of, epoch=2)  # registered again, on its SASL port
        ch = channels.get(LEADER)
        assert ch is not None and ch is not old and ch.port == port_of["SASL_PLAINTEXT"]
        with pytest.raises(TransportError):
            await old.request(ApiKey.METADATA, 12, METADATA, 10)  # the old channel was closed
        assert (await ch.request(ApiKey.METADATA, 12, METADATA, 10)).brokers
        in_flight = asyncio.ensure_future(ch.request(ApiKey.FETCH, 12, long_poll(5000), 10))
        await asyncio.sleep(0.05)
        channels.close()  # the broker shuts down: what is in flight fails, nothing new is sent
        with pytest.raises(TransportError):
            await in_flight
        assert not ch.connected
        with pytest.raises(TransportError):
            await ch.request(ApiKey.METADATA, 12, METADATA, 10)

    asyncio.run(run())
