"""What a handler gets besides the request body and its bound services: who asked, and how."""

from __future__ import annotations

from dataclasses import dataclass

from pylog.security.principal import ANONYMOUS, KafkaPrincipal


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str  # "address:port" of the connection
    listener: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    security_protocol: str = "PLAINTEXT"
    # this node calling its own controller in-process (no connection, nothing to authorize)
    internal: bool = False
    # what the client said it is in ApiVersions (v3+) on this connection, if it did
    client_software_name: str | None = None
    client_software_version: str | None = None

    @property
    def client_address(self) -> str:
        """The client's IP address, as ACL hosts name it."""
        host = self.client_host.rpartition(":")[0] if ":" in self.client_host else self.client_host
        return host.strip("[]")

    @property
    def client_port(self) -> int | None:
        port = self.client_host.rpartition(":")[2]
        return int(port) if port.isdigit() else None
