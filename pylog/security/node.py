"""``NodeSecurity``: everything security a node needs, built and checked once at start.

Listeners get their server side (TLS context, SASL settings); the node's own connections get
their client side: to the inter-broker listener of other brokers (replication, with
``sasl.mechanism.inter.broker.protocol``) and to the controllers' listener (Raft, registration,
forwarded admin requests, with ``sasl.mechanism.controller.protocol``). A node that is a quorum of
one makes no such connections, so their settings are only checked in a cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pylog.cluster.node_config import NodeSettings, parse_protocol_map
from pylog.config import BrokerConfig, ConfigError
from pylog.security.client import PLAINTEXT, ClientSecurity
from pylog.security.listener import ListenerSecurity, listener_security, node_client_security
from pylog.security.scram import CredentialLookup, ScramCredential, ScramMechanismType

log = logging.getLogger(__name__)


@dataclass
class NodeSecurity:
    listeners: dict[str, ListenerSecurity] = field(default_factory=dict)
    inter_broker: ClientSecurity = PLAINTEXT
    controller: ClientSecurity = PLAINTEXT
    inter_broker_problem: str | None = None  # why inter_broker could not be built (a single node)

    def own_client(self) -> ClientSecurity:
        """How this node's own clients reach its inter-broker listener; raises ConfigError when the
        settings for that are missing."""
        if self.inter_broker_problem is not None:
            raise ConfigError(
                f"this node connects to its own inter-broker listener: {self.inter_broker_problem}"
            )
        return self.inter_broker

    def listener(self, name: str) -> ListenerSecurity | None:
        return self.listeners.get(name)

    @classmethod
    def from_config(
        cls, config: BrokerConfig, settings: NodeSettings, scram_credentials: CredentialLookup
    ) -> NodeSecurity:
        out = cls()
        for li in settings.listeners:
            out.listeners[li.name] = listener_security(
                config, li.name, li.security_protocol, scram_credentials
            )
        inter = settings.inter_broker_listener_name
        protocols = {li.name: li.security_protocol for li in settings.listeners}
        map_ = parse_protocol_map(
            [p for p in (config.raw("listener.security.protocol.map") or "").split(",") if p]
        )
        controller_name = settings.controller_listener_names[0] if settings.controller_listener_names else ""
        controller_protocol = protocols.get(controller_name) or map_.get(controller_name, "PLAINTEXT")
        try:
            if inter:
                out.inter_broker = node_client_security(
                    config, inter, protocols.get(inter, "PLAINTEXT"), "sasl.mechanism.inter.broker.protocol"
                )
            if controller_name:
                out.controller = node_client_security(
                    config, controller_name, controller_protocol, "sasl.mechanism.controller.protocol"
                )
        except ConfigError as exc:
            if not settings.standalone:
                raise
            out.inter_broker_problem = str(exc)
        return out


def image_credentials(image: Callable[[], object | None]) -> CredentialLookup:
    """A SCRAM credential lookup over the current metadata image."""

    def lookup(name: str, mechanism: ScramMechanismType) -> ScramCredential | None:
        current = image()
        return None if current is None else current.scram_credential(name, mechanism)  # type: ignore[attr-defined]

    return lookup
