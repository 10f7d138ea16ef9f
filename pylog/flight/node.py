"""The Flight server's view of its broker: built from a started ``pylog.broker.broker.Broker``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pylog.broker.acl_operations import ResourceType
from pylog.flight.server import FLIGHT_LISTENER, FlightNode, FlightService, start_flight
from pylog.security.principal import KafkaPrincipal


def broker_flight(broker: Any) -> list[FlightService]:
    """The Flight servers of ``pylog.flight.listeners`` (none when unset), serving ``broker``."""
    listeners = broker.config.raw("pylog.flight.listeners")
    if not listeners:
        return []
    from pylog.schema_registry.auth import registry_security

    access = registry_security([broker.security.listener(s.listener) for s in broker.servers],
                               broker.authorization, now_ms=broker.clock.wall_ms)
    authz = broker.authorization

    def led(topic: str) -> dict[int, Path]:
        return {p: part.log.dir.parent for p, part in dict(broker.replicas.topic_partitions(topic)).items()
                if part.is_leader}

    def image() -> Any:
        return broker.metadata.image if broker.metadata is not None else None

    def leaders(topic: str) -> dict[int, int] | None:
        img = image()
        if img is None or img.topic(topic) is None:
            return None
        return {p: part.leader for p, part in img.partitions(topic).items()}

    def locate(node_id: int) -> str | None:
        img = image()
        reg = img.brokers.get(node_id) if img is not None else None
        for ep in reg.endpoints if reg is not None else ():
            if ep.name == FLIGHT_LISTENER:
                return f"grpc://{f'[{ep.host}]' if ':' in ep.host else ep.host}:{ep.port}"
        return None

    def authorize(principal: KafkaPrincipal, host: str, op: int, topic: str) -> bool:
        return bool(authz.authorizer().authorize(principal, host, op, ResourceType.TOPIC, topic))

    node = FlightNode(broker.node_id, led, leaders, locate, authorize, broker._own_client,
                      access.authenticator, acls=lambda: bool(authz.enabled))
    return start_flight(listeners, node)
