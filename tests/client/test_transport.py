"""The client transport over real sockets: a real broker process for pipelining, TLS, SASL PLAIN
and SCRAM, and a restart; small asyncio servers of the test's own for a broken frame and a
broker that never answers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pylog.protocol.api import ApiKey
from sdk_helpers import Broker

from pylog.client.cluster import KafkaClient
from pylog.client.errors import ConnectFailed, ConnectionBroken, RequestTimedOut, TransportError
from pylog.client.protocol import AuthenticationFailed, Channel, ConnectionSettings, KafkaConnection
from pylog.local import LocalBroker, free_port
from pylog.security.client import ClientSecurity, SaslAuthenticationError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """PLAINTEXT, SASL_PLAINTEXT (PLAIN user bob) and SASL_SSL (SCRAM-SHA-512 user carol, a
    certificate from a CA made here) listeners."""
    import trustme

    root = tmp_path_factory.mktemp("transport-secured")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(root / "server.pem"))
    subprocess.run([sys.executable, "-m", "pylog", "storage", "format", "--data-dir", str(root / "data"),
                    "--add-scram", "SCRAM-SHA-512=[name=carol,password=carol-secret]"], check=True,
                   capture_output=True, timeout=60)
    jaas = f'{PLAIN_MODULE} required user_bob="bob-secret";'
    broker = Broker(root / "data", root / "broker.log", {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(root / "server.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
    })
    broker.ca = str(root / "ca.pem")  # type: ignore[attr-defined]
    yield broker
    broker.stop()


def test_many_requests_in_flight_on_one_connection_are_answered_in_order(secured: Broker) -> None:
    host, port = secured.bootstrap.rsplit(":", 1)

    async def run() -> tuple[int, list[tuple[str, str]]]:
        conn = await KafkaConnection.open(host, int(port), ConnectionSettings(client_id="pipeline"))
        try:
            version = conn.version(ApiKey.METADATA)
            names = [f"no-such-topic-{i}" for i in range(200)]
            tasks = [asyncio.ensure_future(conn.request(ApiKey.METADATA, version, {
                "topics": [{"name": n}], "allow_auto_topic_creation": False})) for n in names]
            await asyncio.sleep(0)  # every task has written its request; no answer is read yet
            peak = conn.in_flight
            answers = await asyncio.gather(*tasks)
            return peak, [(n, a.topics[0].name) for n, a in zip(names, answers)]
        finally:
            await conn.close()

    peak, pairs = asyncio.run(run())
    assert peak > 1, "requests were not pipelined"
    assert all(asked == answered for asked, answered in pairs)


async def _server(handle: object) -> tuple[asyncio.AbstractServer, int]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)  # type: ignore[arg-type]
    return server, server.sockets[0].getsockname()[1]


def test_an_oversized_length_prefix_closes_the_connection_with_a_clear_error() -> None:
    async def run() -> tuple[str, bool, bool]:
        closed = asyncio.Event()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(100)
            writer.write((0x7FFFFFF0).to_bytes(4, "big") + b"\x00" * 16)
            await writer.drain()
            if await reader.read(100) == b"":  # the client hung up
                closed.set()
            writer.close()

        server, port = await _server(handle)
        settings = ConnectionSettings(client_id="t", negotiate_versions=False, max_response_bytes=1 << 20)
        conn = await KafkaConnection.open("127.0.0.1", port, settings)
        with pytest.raises(ConnectionBroken) as info:
            await conn.request(ApiKey.API_VERSIONS, 0, {}, timeout_s=5)
        await asyncio.wait_for(closed.wait(), 5)
        server.close()
        return str(info.value), conn.closed, closed.is_set()

    message, conn_closed, server_saw_close = asyncio.run(run())
    assert message == (f"Kafka broker 127.0.0.1:{message.split(':')[1].split()[0]} announced a response of "
                       "2147483632 bytes, more than the 1048576 this connection accepts")
    assert conn_closed and server_saw_close


def test_a_request_without_an_answer_times_out_and_drops_the_connection() -> None:
    async def run() -> tuple[str, str, float]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await reader.read(1000):
                pass  # reads, never answers
            writer.close()

        server, port = await _server(handle)
        settings = ConnectionSettings(client_id="t", negotiate_versions=False)
        conn = await KafkaConnection.open("127.0.0.1", port, settings)
        started = time.monotonic()
        first = asyncio.ensure_future(conn.request(ApiKey.API_VERSIONS, 0, {}, timeout_s=0.3))
        second = asyncio.ensure_future(conn.request(ApiKey.API_VERSIONS, 0, {}, timeout_s=30))
        with pytest.raises(RequestTimedOut) as timed_out:
            await first
        took = time.monotonic() - started
        with pytest.raises(ConnectionBroken) as dropped:
            await second
        assert conn.closed
        server.close()
        return str(timed_out.value), str(dropped.value), took

    timed_out, dropped, took = asyncio.run(run())
    assert timed_out.endswith("did not answer api 18 v0 within 0.3s") and isinstance(
        RequestTimedOut("x"), TimeoutError)
    assert "dropped after api 18 v0 got no answer within 0.3s" in dropped
    assert 0.25 < took < 5


def _client(address: str, settings: dict[str, str]) -> KafkaClient:
    return KafkaClient(address, client_id="transport-test", request_timeout_s=10, security=settings)


def test_sasl_plain_over_plaintext(secured: Broker) -> None:
    address = secured.listeners["SASL_PLAINTEXT"]
    good = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "bob",
            "sasl.password": "bob-secret"}

    async def run(settings: dict[str, str]) -> list[int]:
        client = _client(address, settings)
        try:
            await client.start()
            return sorted((await client.metadata([])).brokers)
        finally:
            await client.close()

    assert asyncio.run(run(good)) == [1]
    with pytest.raises(AuthenticationFailed, match=r"refused the SASL credentials") as info:
        asyncio.run(run({**good, "sasl.password": "wrong"}))
    assert isinstance(info.value, SaslAuthenticationError) and isinstance(info.value, TransportError)


def test_scram_over_tls(secured: Broker) -> None:
    address = secured.listeners["SASL_SSL"]
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol",
                "sasl.password": "carol-secret", "ssl.ca.location": secured.ca}  # type: ignore[attr-defined]

    async def run(settings: dict[str, str]) -> tuple[int, str]:
        client = _client(address, settings)
        try:
            await client.start()
            conn = await client.any_connection()
            node = next(iter((await client.metadata([])).brokers))
            other = await client.connection(node)  # a second secured connection, to the broker's id
            cipher = conn._transport.get_extra_info("cipher")  # type: ignore[union-attr]
            assert other is not conn
            return len(conn.versions), cipher[1]
        finally:
            await client.close()

    apis, tls_version = asyncio.run(run(settings))
    assert apis > 20 and tls_version.startswith("TLSv1.")
    with pytest.raises(AuthenticationFailed):
        asyncio.run(run({**settings, "sasl.password": "nope"}))
    untrusted = {k: v for k, v in settings.items() if k != "ssl.ca.location"}
    with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(run(untrusted))
    assert ClientSecurity.from_config(settings).uses_ssl


def test_a_channel_reconnects_after_the_broker_restarts(tmp_path: Path) -> None:
    port = free_port()
    broker = LocalBroker(tmp_path / "data", port=port, keep_data=True).start()

    async def ask(ch: Channel) -> int:
        resp = await ch.request(ApiKey.API_VERSIONS, 0, {}, 5)
        return resp.error_code

    async def run() -> tuple[int, str, int, float]:
        nonlocal broker
        settings = ConnectionSettings(client_id="restart", negotiate_versions=False,
                                      reconnect_backoff_s=0.05, reconnect_backoff_max_s=0.4)
        ch = Channel("127.0.0.1", port, settings)
        try:
            before = await ask(ch)
            await asyncio.to_thread(broker.stop)
            with pytest.raises(TransportError) as down:
                await ask(ch)
            for _ in range(4):  # refused: each attempt doubles the wait before the next
                with pytest.raises(ConnectFailed):
                    await ask(ch)
            backoff = ch._backoff
            broker = await asyncio.to_thread(
                LocalBroker(tmp_path / "data", port=port, keep_data=True).start)
            deadline = time.monotonic() + 30
            while True:
                try:
                    after = await ask(ch)
                    break
                except ConnectFailed:
                    if time.monotonic() > deadline:
                        raise
            return before, str(down.value), after, backoff
        finally:
            ch.close()

    try:
        before, down, after, backoff = asyncio.run(run())
    finally:
        broker.stop()
    assert before == 0 and after == 0
    assert f"127.0.0.1:{port}" in down
    assert backoff == 0.4


def test_the_cli_runs_without_kafka_python(secured: Broker) -> None:
    code = ("import sys; from pylog.cli import main; rc = main(['topic', 'list', '-b', sys.argv[1]]); "
            "assert 'kafka' not in sys.modules, 'kafka-python was imported'; sys.exit(rc)")
    out = subprocess.run([sys.executable, "-c", code, secured.bootstrap], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("TOPIC")
