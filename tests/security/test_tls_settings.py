"""TLS contexts from Kafka's ssl.* settings, and settings that stop a start with one clear sentence."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
import trustme

from pylog.cluster.node_config import NodeSettings
from pylog.config import BrokerConfig, ConfigError
from pylog.security.node import NodeSecurity
from pylog.security.tls import server_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    (d / "key.pem").write_bytes(cert.private_key_pem.bytes())
    (d / "chain.pem").write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
    return {
        "ca": str(d / "ca.pem"),
        "server": str(d / "server.pem"),
        "key": str(d / "key.pem"),
        "chain": str(d / "chain.pem"),
    }


def getter(settings: dict[str, str]):  # type: ignore[no-untyped-def]
    config = BrokerConfig(settings)
    return lambda name: config.listener_raw("SSL", name)


async def handshake(ctx: ssl.SSLContext, ca: str, max_version: ssl.TLSVersion) -> str:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cafile=ca)
    client.maximum_version = max_version
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"), 5
        )
        version = writer.get_extra_info("ssl_object").version()
        writer.close()
        return version
    finally:
        server.close()
        await server.wait_closed()


def test_enabled_protocols_bound_the_versions(pki: dict[str, str]) -> None:
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"]}
    tls13 = server_context(getter({**base, "ssl.enabled.protocols": "TLSv1.3"}))
    assert asyncio.run(handshake(tls13, pki["ca"], ssl.TLSVersion.TLSv1_3)) == "TLSv1.3"
    with pytest.raises((ssl.SSLError, ConnectionResetError)):  # refused in the handshake
        asyncio.run(handshake(tls13, pki["ca"], ssl.TLSVersion.TLSv1_2))
    both = server_context(getter(base))  # Kafka's default: TLSv1.2,TLSv1.3
    assert asyncio.run(handshake(both, pki["ca"], ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"


def test_keystore_as_pem_text(pki: dict[str, str]) -> None:
    ctx = server_context(
        getter(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.key": Path(pki["key"]).read_text(),
                "ssl.keystore.certificate.chain": Path(pki["chain"]).read_text(),
            }
        )
    )
    assert asyncio.run(handshake(ctx, pki["ca"], ssl.TLSVersion.TLSv1_3)) == "TLSv1.3"


@pytest.mark.parametrize(
    "settings,message",
    [
        ({}, "ssl.keystore.location is required"),
        ({"ssl.keystore.location": "SERVER"}, "ssl.keystore.type=JKS is not supported"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"},
            "cannot load the keystore",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "SERVER", "ssl.client.auth": "required"},
            "ssl.client.auth=required needs ssl.truststore.location",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "SERVER",
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.location": "CA",
            },
            "ssl.truststore.type=PKCS12 is not supported",
        ),
    ],
)
def test_bad_tls_settings(pki: dict[str, str], settings: dict[str, str], message: str) -> None:
    resolved = {k: v.replace("SERVER", pki["server"]).replace("CA", pki["ca"]) for k, v in settings.items()}
    with pytest.raises(ConfigError, match=message):
        server_context(getter(resolved), "listener SSL: ")


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "GSSAPI, which pylog does not serve"),
        (
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"},
            "PLAIN needs listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'PlainLoginModule required user_a="b"',
            },
            "must end with ';'",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                "inter.broker.listener.name": "SASL_SSL",
                "controller.quorum.voters": "1@127.0.0.1:9999",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                "SASL_SSL:SASL_SSL",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "SERVER",
            },
            "sasl.mechanism.inter.broker.protocol=GSSAPI",
        ),
    ],
)
def test_bad_sasl_settings_stop_the_start(
    pki: dict[str, str], settings: dict[str, str], message: str
) -> None:
    resolved = {k: v.replace("SERVER", pki["server"]) for k, v in settings.items()}
    if "controller.quorum.voters" in resolved:
        resolved["listeners"] += ",CONTROLLER://127.0.0.1:9999"
    config = BrokerConfig(resolved)
    with pytest.raises(ConfigError, match=message):
        NodeSecurity.from_config(config, NodeSettings.from_config(config), lambda name, mechanism: None)
