"""``BrokerChannels``: connections from this broker to the others, one per broker, to its
inter-broker listener as the metadata image registers it, with the inter-broker listener's TLS /
SASL settings (`pylog.cluster.channel.node_channel`: pylog's client transport); a broker that
registered again on another address gets a new channel, and the old one is closed.

Each user has its own set, as Kafka's replica fetchers and transaction marker sender have their
own network clients: a broker answers a connection's requests in order, and a WriteTxnMarkers
waits until the partition's followers have fetched the marker, so a follower fetch queued behind
it on the same connection could never report that it had.
"""

from __future__ import annotations

from collections.abc import Callable

from pylog.client.protocol import Channel
from pylog.cluster.channel import node_channel
from pylog.cluster.image import MetadataImage
from pylog.security.client import PLAINTEXT, ClientSecurity


class BrokerChannels:
    """One channel per broker, to its inter-broker listener as the image registers it."""

    def __init__(
        self,
        node_id: int,
        listener: str,
        image: Callable[[], MetadataImage],
        security: ClientSecurity = PLAINTEXT,
        *,
        client_id: str,
    ) -> None:
        self.node_id = node_id
        self.client_id = client_id
        self.listener = listener
        self.security = security  # TLS / SASL of the inter-broker listener
        self._image = image
        self._channels: dict[int, Channel] = {}

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        b = self._image().brokers.get(broker_id)
        if b is None:
            return None
        for e in b.endpoints:
            if e.name == self.listener:
                return e.host, e.port
        return (b.endpoints[0].host, b.endpoints[0].port) if b.endpoints else None

    def get(self, broker_id: int) -> Channel | None:
        address = self.endpoint(broker_id)
        if address is None:
            return None
        ch = self._channels.get(broker_id)
        if ch is not None and (ch.host, ch.port) != address:
            ch.close()
            ch = None
        if ch is None:
            ch = self._channels[broker_id] = node_channel(
                *address, client_id=self.client_id, security=self.security
            )
        return ch

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
