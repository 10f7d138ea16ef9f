"""pylog's Kafka client transport: one pipelined, secured connection used by every pylog client.

Layers, each usable alone:

- `pylog.client.connection`: ``ClientConnection``, the sans-IO core (correlation ids, requests in
  flight, response frames via ``FrameReader``, pylog's codec);
- `pylog.client.protocol`: ``KafkaConnection`` (asyncio: TLS, SASL, ApiVersions, timeouts) and
  ``Channel`` (a broker address, reconnecting with backoff);
- `pylog.client.cluster`: ``KafkaClient`` (bootstrap, version choice, metadata cache, leaders and
  coordinators, connections per broker);
- `pylog.client.blocking`: the I/O loop thread and ``BlockingClient`` for notebooks and the CLI.

The SDK, the schema registry, the CLI and the nodes' channels to one another all use it.
"""

from __future__ import annotations

from pylog._lazy import lazy_exports

_LAZY = {
    "ClientConnection": "pylog.client.connection",
    "KafkaConnection": "pylog.client.protocol",
    "ConnectionSettings": "pylog.client.protocol",
    "Channel": "pylog.client.protocol",
    "KafkaClient": "pylog.client.cluster",
    "BlockingClient": "pylog.client.blocking",
    "KafkaError": "pylog.client.errors",
    "TransportError": "pylog.client.errors",
    "ConnectFailed": "pylog.client.errors",
    "ConnectionBroken": "pylog.client.errors",
    "RequestTimedOut": "pylog.client.errors",
    "UnknownTopicError": "pylog.client.errors",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
