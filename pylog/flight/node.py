"""The Flight server's view of its broker: built from a started ``pylog.broker.broker.Broker``."""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pylog.cluster.records import SecurityProtocol
from pylog.flight.server import FLIGHT_LISTENER, FlightNode, FlightService, flight_url, start_flight
from pylog.flight.sources import LeaderTier
from pylog.security.acl_operations import ResourceType
from pylog.security.principal import KafkaPrincipal, parse_mapping_rules
from pylog.security.tls import server_context


def broker_flight(broker: Any) -> list[FlightService]:
    """The Flight servers of ``pylog.flight.listeners`` (none when unset), serving ``broker``."""
    listeners = broker.config.raw("pylog.flight.listeners")
    if not listeners:
        return []
    from pylog.schema_registry.auth import registry_security

    access = registry_security([broker.security.listener(s.listener) for s in broker.servers],
                               broker.authorization, clock=broker.clock)
    authz = broker.authorization

    def led(topic: str) -> dict[int, Path]:
        return {p: part.log.dir.parent for p, part in dict(broker.replicas.topic_partitions(topic)).items()
                if part.is_leader}

    def log_end(topic: str, partition: int) -> int | None:
        part = dict(broker.replicas.topic_partitions(topic)).get(partition)
        return part.log_end_offset if part is not None and part.is_leader else None

    def readable_end(topic: str, partition: int, committed: bool) -> int | None:
        part = dict(broker.replicas.topic_partitions(topic)).get(partition)
        if part is None or not part.is_leader:
            return None
        for _ in range(3):  # the producers' state changes on the broker's loop, read here on Flight's
            try:
                return part.last_stable_offset if committed else part.high_watermark
            except RuntimeError:  # changed while it was read
                continue
        return part.high_watermark if not committed else None

    def tier(topic: str, partition: int) -> LeaderTier | None:
        reads = broker.replicas.remote_reads
        part = dict(broker.replicas.topic_partitions(topic)).get(partition)
        if reads is None or part is None or not part.is_leader:
            return None
        uri = str(broker.config.raw("remote.log.storage.uri") or "")
        return LeaderTier(topic, partition, lambda: reads.remote_log(part), uri)

    def image() -> Any:
        return broker.metadata.image if broker.metadata is not None else None

    def leaders(topic: str) -> dict[int, int] | None:
        img = image()
        if img is None or img.topic(topic) is None:
            return None
        return {p: part.leader for p, part in img.partitions(topic).items()}

    def topics() -> list[str]:
        img = image()
        return list(img.topics) if img is not None else []

    def subjects() -> set[str]:
        registry = getattr(broker.schema_registry, "registry", None)
        if registry is None:
            return set()
        for _ in range(3):  # the registry's state changes on the broker's loop, read here on Flight's
            try:
                return {name for name, versions in list(registry.state.subjects.items())
                        if any(not v.deleted for v in list(versions.values()))}
            except RuntimeError:  # changed while it was read
                continue
        return set()

    def locate(node_id: int) -> str | None:
        img = image()
        reg = img.brokers.get(node_id) if img is not None else None
        for ep in reg.endpoints if reg is not None else ():
            if ep.name == FLIGHT_LISTENER:
                return flight_url(ep.host, ep.port, tls=ep.security_protocol == SecurityProtocol.SSL)
        return None

    def authorize(principal: KafkaPrincipal, host: str, op: int, topic: str) -> bool:
        return bool(authz.authorizer().authorize(principal, host, op, ResourceType.TOPIC, topic))

    node = FlightNode(broker.node_id, led, leaders, locate, authorize, lambda: broker.own_client,
                      access.authenticator, acls=lambda: bool(authz.enabled), topics=topics,
                      subjects=subjects, clock=broker.clock, log_end=log_end, tier=tier,
                      readable_end=readable_end)
    return start_flight(listeners, node, lambda: tls_certificates(broker), lambda: mutual_tls(broker))


_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.S)


def _tls_listener(broker: Any) -> tuple[str, Callable[[str], str | None]]:
    """The first client listener with TLS (its ssl.* settings are the Flight server's): its name and
    a reader of its settings."""
    tls = [li for li in broker.settings.broker_listeners if li.security_protocol in ("SSL", "SASL_SSL")]
    if not tls:
        raise ValueError("pylog.flight.listeners: grpc+tls:// needs a client listener with TLS (its ssl.* "
                         "settings are the Flight server's)")
    name = tls[0].name

    def get(key: str) -> str | None:
        value = broker.config.listener_raw(name, key)
        return None if value is None else str(value)

    return name, get


def mutual_tls(broker: Any) -> tuple[ssl.SSLContext, tuple[Any, ...]] | None:
    """When the TLS listener asks for client certificates (``ssl.client.auth`` required or
    requested): a server context from its settings offering HTTP/2 (gRPC's ALPN), and its
    ``ssl.principal.mapping.rules``; else None (gRPC's own TLS serves)."""
    name, get = _tls_listener(broker)
    if (get("ssl.client.auth") or "none").strip().lower() == "none":
        return None
    context = server_context(get, f"listener {name}: ")
    context.set_alpn_protocols(["h2"])
    return context, parse_mapping_rules(get("ssl.principal.mapping.rules"))


def tls_certificates(broker: Any) -> list[tuple[bytes, bytes]]:
    """(certificate chain, private key) in PEM of the first client listener with TLS, from its
    ``ssl.keystore.*`` settings (pylog's keystores are PEM, see ``pylog.security.tls``)."""
    name, get = _tls_listener(broker)

    location = get("ssl.keystore.location")
    text = Path(location).read_text() if location else \
        f"{get('ssl.keystore.key') or ''}\n{get('ssl.keystore.certificate.chain') or ''}"
    blocks = [(m.group(1), m.group(0)) for m in _PEM.finditer(text)]
    chain = "\n".join(b for kind, b in blocks if kind == "CERTIFICATE")
    keys = [(kind, b) for kind, b in blocks if "PRIVATE KEY" in kind]
    if not chain or not keys:
        raise ValueError(f"pylog.flight.listeners: the keystore of listener {name} holds no "
                         f"certificate and private key in PEM")
    kind, key = keys[0]
    if kind == "ENCRYPTED PRIVATE KEY":
        from cryptography.hazmat.primitives import serialization

        password = get("ssl.key.password")
        private = serialization.load_pem_private_key(key.encode(), password.encode() if password else None)
        key = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
    return [(chain.encode(), key.encode())]
