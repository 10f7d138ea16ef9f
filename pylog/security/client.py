"""The client side: how a connection reaches a secured listener (TLS, then SASL), used by this
node's channels to other nodes and by the SDK.

``ClientSecurity.from_config`` reads Kafka client settings under their usual names, both
librdkafka's and the Java client's: ``security.protocol``, ``sasl.mechanism`` (or
``sasl.mechanisms``), ``sasl.username`` / ``sasl.password`` (or a ``sasl.jaas.config`` line),
``ssl.ca.location`` / ``ssl.cafile`` / ``ssl.truststore.location``, ``ssl.certificate.location`` /
``ssl.certfile`` and ``ssl.key.location`` / ``ssl.keyfile`` (or a PEM ``ssl.keystore.location``),
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (``https`` or ``none``). With
``sasl.mechanism=OAUTHBEARER`` the client takes its tokens from an OAuth token endpoint
(client_credentials): ``sasl.oauthbearer.token.endpoint.url``, ``sasl.oauthbearer.client.id`` /
``sasl.oauthbearer.client.secret`` (or Kafka's ``sasl.oauthbearer.client.credentials.client.id`` /
``...secret``, or ``clientId`` / ``clientSecret`` in an OAuthBearerLoginModule JAAS line) and
``sasl.oauthbearer.scope``.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scramp import ScramClient, ScramException

from pylog.protocol.errors import ErrorCode
from pylog.security.jaas import parse_jaas
from pylog.security.oauth_client import ClientCredentialsTokens, TokenEndpointError
from pylog.security.oauthbearer import OAUTHBEARER, client_first
from pylog.security.sasl_server import PLAIN, SERVED_MECHANISMS
from pylog.security.tls import client_context

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_AUTHENTICATE_VERSION = 1

# every name from_config accepts, and the canonical one it stands for
_ALIASES = {
    "security.protocol": "security.protocol",
    "sasl.mechanism": "sasl.mechanism",
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.username": "sasl.username",
    "sasl.password": "sasl.password",
    "sasl.jaas.config": "sasl.jaas.config",
    "ssl.ca.location": "ssl.cafile",
    "ssl.cafile": "ssl.cafile",
    "ssl.truststore.location": "ssl.cafile",
    "ssl.truststore.type": "ssl.truststore.type",
    "ssl.certificate.location": "ssl.certfile",
    "ssl.certfile": "ssl.certfile",
    "ssl.keystore.location": "ssl.certfile",
    "ssl.keystore.type": "ssl.keystore.type",
    "ssl.key.location": "ssl.keyfile",
    "ssl.keyfile": "ssl.keyfile",
    "ssl.key.password": "ssl.key.password",
    "ssl.password": "ssl.key.password",
    "ssl.endpoint.identification.algorithm": "ssl.endpoint.identification.algorithm",
    "ssl.check.hostname": "ssl.check.hostname",
    "sasl.oauthbearer.method": "sasl.oauthbearer.method",
    "sasl.oauthbearer.token.endpoint.url": "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret": "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope": "sasl.oauthbearer.scope",
    "sasl.login.callback.handler.class": "sasl.login.callback.handler.class",
}
SECURITY_CONFIG_NAMES = frozenset(_ALIASES)


class SaslAuthenticationError(ConnectionError):
    """The broker refused this client's SASL credentials (or the mechanism)."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    oauth: ClientCredentialsTokens | None = None  # OAUTHBEARER's tokens

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def connect_kwargs(self, host: str) -> dict[str, Any]:
        """Extra arguments for ``asyncio.open_connection`` (TLS and the name to check)."""
        if not self.uses_ssl:
            return {}
        return {"ssl": self.ssl_context, "server_hostname": host}

    async def authenticate(self, request: Callable[[int, int, Any], Awaitable[Any]]) -> int:
        """Run SaslHandshake + SaslAuthenticate over ``request(api_key, version, body)`` when the
        protocol needs it; returns the session lifetime in ms (0: none)."""
        if not self.uses_sasl:
            return 0
        assert self.mechanism is not None
        resp = await request(SASL_HANDSHAKE, 1, {"mechanism": self.mechanism})
        if resp.error_code:
            raise SaslAuthenticationError(
                f"the broker does not enable SASL mechanism {self.mechanism} "
                f"(it offers {', '.join(resp.mechanisms) or 'none'})"
            )
        if self.oauth is not None:
            try:
                access_token = await self.oauth.token()
            except TokenEndpointError as exc:
                raise SaslAuthenticationError(str(exc)) from None
            exchange = SaslClientExchange(self.mechanism, "", access_token)
        else:
            exchange = SaslClientExchange(self.mechanism, self.username or "", self.password or "")
        token: bytes | None = exchange.first()
        lifetime = 0
        while token is not None:
            resp = await request(SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token})
            if resp.error_code:
                name = ErrorCode.of(resp.error_code).name
                raise SaslAuthenticationError(f"{name}: {resp.error_message or 'authentication failed'}")
            lifetime = getattr(resp, "session_lifetime_ms", 0) or 0
            token = exchange.next(bytes(resp.auth_bytes))
        return lifetime

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> ClientSecurity:
        """From Kafka client settings; raises ValueError naming the setting at fault."""
        settings: dict[str, str] = {}
        for key, value in (config or {}).items():
            canonical = _ALIASES.get(key)
            if canonical is None:
                raise ValueError(
                    f"unknown security setting {key!r}; known: {', '.join(sorted(SECURITY_CONFIG_NAMES))}"
                )
            if value is not None:
                settings[canonical] = str(value)
        protocol = settings.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, got {protocol!r}"
            )
        ctx = None
        if protocol in ("SSL", "SASL_SSL"):
            for kind in ("ssl.truststore.type", "ssl.keystore.type"):
                if settings.get(kind, "PEM").upper() != "PEM":
                    raise ValueError(f"{kind} must be PEM (pylog reads PEM files)")
            algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
            check = settings.get("ssl.check.hostname", "true" if algorithm == "https" else "false")
            try:
                ctx = client_context(
                    cafile=settings.get("ssl.cafile"),
                    certfile=settings.get("ssl.certfile"),
                    keyfile=settings.get("ssl.keyfile"),
                    password=settings.get("ssl.key.password"),
                    check_hostname=check.strip().lower() == "true",
                )
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"cannot load the TLS files: {exc}") from None
        mechanism = username = password = None
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = settings.get("sasl.mechanism", "GSSAPI").strip().upper()
            if mechanism not in SERVED_MECHANISMS:
                raise ValueError(
                    f"sasl.mechanism must be one of {', '.join(SERVED_MECHANISMS)}, got {mechanism!r}"
                )
            if mechanism == OAUTHBEARER:
                return cls(protocol, ctx, mechanism, oauth=token_source(settings))
            username, password = settings.get("sasl.username"), settings.get("sasl.password")
            if "sasl.jaas.config" in settings:
                options = parse_jaas(settings["sasl.jaas.config"]).options
                username, password = options.get("username", username), options.get("password", password)
            if not username or password is None:
                raise ValueError(f"{protocol} with {mechanism} needs sasl.username and sasl.password")
        return cls(protocol, ctx, mechanism, username, password)


PLAINTEXT = ClientSecurity()


def token_source(settings: Mapping[str, str]) -> ClientCredentialsTokens:
    """OAUTHBEARER's token endpoint and client credentials from client settings (canonical names);
    raises ValueError naming what is missing."""
    method = settings.get("sasl.oauthbearer.method", "oidc").strip().lower()
    if method != "oidc":
        raise ValueError(f"sasl.oauthbearer.method={method}: pylog's clients support oidc (a token endpoint)")
    options = parse_jaas(settings["sasl.jaas.config"]).options if "sasl.jaas.config" in settings else {}
    url = settings.get("sasl.oauthbearer.token.endpoint.url")
    client_id = settings.get("sasl.oauthbearer.client.id") or options.get("clientId")
    secret = settings.get("sasl.oauthbearer.client.secret") or options.get("clientSecret")
    if not url or not client_id or secret is None:
        raise ValueError(
            "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.id and "
            "sasl.oauthbearer.client.secret (tokens come from the client_credentials grant)"
        )
    scope = settings.get("sasl.oauthbearer.scope") or options.get("scope")
    return ClientCredentialsTokens(url, client_id, secret, scope)


class SaslClientExchange:
    """The client's messages of one exchange: ``first()``, then ``next(server message)`` until None."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username, self._password = username, password
        self._scram: ScramClient | None = None
        self._step = 0

    def first(self) -> bytes:
        if self.mechanism == OAUTHBEARER:  # the password is the token
            return client_first(self._password)
        if self.mechanism == PLAIN:
            return b"\x00" + self._username.encode() + b"\x00" + self._password.encode()
        self._scram = ScramClient([self.mechanism], self._username, self._password)
        return self._scram.get_client_first().encode()

    def next(self, server_message: bytes) -> bytes | None:
        self._step += 1
        if self.mechanism == OAUTHBEARER:  # an error message: acknowledge it, the failure follows
            return b"\x01" if server_message and self._step == 1 else None
        if self._scram is None:
            return None
        try:
            if self._step == 1:
                self._scram.set_server_first(server_message.decode())
                return self._scram.get_client_final().encode()
            self._scram.set_server_final(server_message.decode())
        except (ScramException, UnicodeDecodeError) as exc:
            raise SaslAuthenticationError(f"the broker's SCRAM answer does not verify: {exc}") from None
        return None
