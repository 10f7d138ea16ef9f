"""This node's Kafka-protocol connections to other nodes' listeners.

Every node-to-node connection (Raft between voters, the quorum fetcher, observers, the controller
channel that carries registration, heartbeats and forwarded admin requests, the replica fetchers
and the transaction-marker sender) is pylog's client transport, `pylog.client.protocol.Channel`:
requests pipelined on one connection and answered in order, reconnecting on demand, secured with
the node's ``ClientSecurity`` (TLS from the start, SASL before the first request, the session
replaced before the lifetime the broker grants runs out). A failure (refused, reset, a frame that
does not parse, a request past its timeout) fails every request in flight and drops the
connection; the next request connects again. Nodes skip the ApiVersions round trip (they speak
the same codec) and the channel keeps no backoff of its own: its callers retry on their own
schedule (Raft tolerates a lost message, a controller call retries against whoever leads next,
a replica fetcher waits ``replica.fetch.backoff.ms``).
"""

from __future__ import annotations

from pylog.client.errors import TransportError
from pylog.client.protocol import Channel, ConnectionSettings
from pylog.security.client import PLAINTEXT, ClientSecurity

CONNECT_TIMEOUT_S = 2.0
"""Connecting (TLS and SASL included) to a node that answers takes far less; one that does not is
tried again on the caller's schedule."""

ChannelError = TransportError
"""The request did not get an answer: no connection, a broken one, or a timeout."""


def node_settings(*, client_id: str, security: ClientSecurity = PLAINTEXT) -> ConnectionSettings:
    """How this node connects to another node's listener."""
    return ConnectionSettings(
        client_id=client_id, security=security, connect_timeout_s=CONNECT_TIMEOUT_S,
        negotiate_versions=False, reconnect_backoff_s=0.0, reconnect_backoff_max_s=0.0)


def node_channel(host: str, port: int, *, client_id: str, security: ClientSecurity = PLAINTEXT) -> Channel:
    """A connection to another node's listener; ``request(api_key, version, body, timeout_s)``
    raises ChannelError, ``close()`` drops it."""
    return Channel(host, port, node_settings(client_id=client_id, security=security))
