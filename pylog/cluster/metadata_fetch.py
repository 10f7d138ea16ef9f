"""PylogMetadataFetch v1 from the controllers: what a broker's observer and a controller's quorum
fetcher both send. One connection per controller address; every answer teaches the addresses the
leader's endpoint on this listener."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pylog.client.protocol import Channel
from pylog.cluster.channel import node_channel
from pylog.cluster.quorum_addresses import QuorumAddresses
from pylog.protocol.api import PylogApiKey
from pylog.security.client import PLAINTEXT, ClientSecurity

MAX_WAIT_MS = 500
MAX_BYTES = 8 * 1024 * 1024


@dataclass
class MetadataFetches:
    """Sends metadata fetches of replica `node_id` to the controllers of `addresses`."""

    node_id: int
    cluster_id: str
    addresses: QuorumAddresses
    request_timeout_s: float
    security: ClientSecurity = PLAINTEXT
    _channels: dict[tuple[str, int], Channel] = field(default_factory=dict)

    async def fetch(self, address: tuple[str, int], fetch_offset: int, directory_id: Any = None) -> Any:
        """The answer from `address` to a fetch from `fetch_offset`; raises ChannelError."""
        body = {
            "cluster_id": self.cluster_id,
            "replica_id": self.node_id,
            "replica_directory_id": directory_id,
            "fetch_offset": fetch_offset,
            "max_wait_ms": MAX_WAIT_MS,
            "max_bytes": MAX_BYTES,
        }
        resp = await self._channel(address).request(
            PylogApiKey.METADATA_FETCH, 1, body, MAX_WAIT_MS / 1000 + self.request_timeout_s
        )
        for e in resp.leader_endpoints:
            if e.name == self.addresses.listener and resp.leader_id >= 0:
                self.addresses.learn(resp.leader_id, (e.host, e.port))
        return resp

    def _channel(self, address: tuple[str, int]) -> Channel:
        ch = self._channels.get(address)
        if ch is None:
            client_id = f"pylog-observer-{self.node_id}"
            ch = self._channels[address] = node_channel(*address, client_id=client_id, security=self.security)
        return ch

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
