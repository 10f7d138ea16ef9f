"""A client's credentials for a schema registry, taken from its Kafka client security settings.

A broker's registry accepts the users of its SASL listener as HTTP Basic and serves https with the
listener's certificates, so a client that reaches the broker reaches the registry with the same
settings: SASL PLAIN / SCRAM ``sasl.username`` + ``sasl.password`` become Basic credentials, an
OAUTHBEARER client's client_credentials token (``sasl.oauthbearer.token.endpoint.url``,
``sasl.oauthbearer.client.id`` / ``...secret``) becomes a Bearer token, and the TLS context (CA,
client certificate) of ``ssl.*`` verifies an https registry.
"""

from __future__ import annotations

import base64
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any

from pylog.security.client import ClientSecurity
from pylog.security.oauth_client import ClientCredentialsTokens


@dataclass(frozen=True)
class RegistryCredentials:
    username: str | None = None
    password: str | None = None
    ssl_context: ssl.SSLContext | None = None
    tokens: ClientCredentialsTokens | None = None  # OAUTHBEARER: Bearer tokens instead of Basic

    @classmethod
    def of(cls, security: ClientSecurity | Any) -> RegistryCredentials:
        """From a ``ClientSecurity``, a mapping of Kafka client settings, None (no credentials) or
        credentials already made."""
        if security is None:
            return NONE
        if isinstance(security, RegistryCredentials):
            return security
        if not isinstance(security, ClientSecurity):
            security = ClientSecurity.from_config(security)
        if security.oauth is not None:
            return cls(ssl_context=security.ssl_context, tokens=security.oauth)
        if security.uses_sasl:
            return cls(security.username, security.password, security.ssl_context)
        return cls(ssl_context=security.ssl_context)

    def headers(self) -> dict[str, str]:
        """The ``Authorization`` header (blocks while a token is fetched from the token endpoint)."""
        if self.tokens is not None:
            return {"Authorization": f"Bearer {self.tokens.token_blocking()}"}
        if self.username is None:
            return {}
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def open(self, url: str, *, data: bytes | None = None, method: str | None = None,
             headers: dict[str, str] | None = None, timeout_s: float = 30.0) -> Any:
        """``urllib.request.urlopen`` with these credentials (the caller closes the response)."""
        all_headers = {**(headers or {}), **self.headers()}
        req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
        context = self.ssl_context if url.lower().startswith("https:") else None
        return urllib.request.urlopen(req, timeout=timeout_s, context=context)


NONE = RegistryCredentials()
