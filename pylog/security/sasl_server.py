"""The server side of SASL on one connection (SaslHandshake 17, SaslAuthenticate 36), sans-IO.

Theory of operation
-------------------
A connection to a SASL listener starts in HANDSHAKE: it may ask ApiVersions and must send
SaslHandshake naming an enabled mechanism (else UNSUPPORTED_SASL_MECHANISM, and the connection is
closed). In AUTHENTICATE each SaslAuthenticate carries one client message of the mechanism's
exchange (PLAIN: one; SCRAM: client-first then client-final; OAUTHBEARER: one, or two when the
token is refused) and gets the server's answer. An OAUTHBEARER token naming a signing key not
known yet is checked once the shell has fetched the keys again (``wait_before``). When
the exchange completes the connection is COMPLETE with a principal (``User:<name>``); a failed
exchange is answered SASL_AUTHENTICATION_FAILED and the connection closed. Any other request
before COMPLETE closes the connection (Kafka: "Unexpected Kafka request during SASL handshake").

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` set, the final SaslAuthenticate
(v1+) tells the client its session lifetime. Before it ends the client sends SaslHandshake and
SaslAuthenticate again on the same connection, with the same mechanism, and must come back as the
same principal. A request other than those after the session expired closes the connection. An
OAUTHBEARER session also ends when its token expires (KIP-368: the lifetime is the shorter of the
two). The caller passes the clocks in (``now_ms``, and ``wall_ms`` for token times); nothing here
reads one.
"""

from __future__ import annotations

import enum
import hmac
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.protocol.errors import ErrorCode
from pylog.security.oauthbearer import OAUTHBEARER, OAuthBearerServerExchange, OAuthBearerValidation
from pylog.security.principal import KafkaPrincipal, user
from pylog.security.scram import (
    SCRAM_MECHANISMS,
    AuthenticationFailed,
    CredentialLookup,
    ScramServerExchange,
)

PLAIN = "PLAIN"
SERVED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class SaslServerSettings:
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram_credentials: CredentialLookup
    reauth_ms: int = 0
    oauth: OAuthBearerValidation | None = None  # set when OAUTHBEARER is enabled


class PlainServerExchange:
    """SASL/PLAIN (RFC 4616): ``authzid NUL authcid NUL password``, checked against the JAAS users."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, name, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not name:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authzid and authzid != name:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(name)
        # compare even for unknown users, so timing does not tell which names exist
        ok = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\x00" + password).encode()
        )
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.username = name
        self.complete = True
        return b""


class SaslAuthenticator:
    def __init__(self, settings: SaslServerSettings) -> None:
        self.settings = settings
        self.state = SaslState.HANDSHAKE
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.session_expiry_ms: int | None = None  # None: the session does not expire
        self.reauthentications = 0
        self.failure_reason = ""  # why the last exchange failed, for the log
        self._exchange: PlainServerExchange | ScramServerExchange | OAuthBearerServerExchange | None = None
        self._reauth = False

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def in_exchange(self) -> bool:
        """Between a SaslHandshake and the end of its exchange (first or re-authentication)."""
        return self.state is SaslState.AUTHENTICATE

    def expired(self, now_ms: int) -> bool:
        return self.session_expiry_ms is not None and now_ms >= self.session_expiry_ms

    def handshake(self, mechanism: str) -> tuple[dict[str, Any], bool]:
        """SaslHandshake: (response body, close the connection after answering)."""
        enabled = list(self.settings.mechanisms)
        if self.state is SaslState.COMPLETE:
            if mechanism != self.mechanism:
                self.state = SaslState.FAILED
                return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}, True
            self._reauth = True
        elif self.state is not SaslState.HANDSHAKE:
            self.state = SaslState.FAILED
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}, True
        if mechanism not in self.settings.mechanisms:
            self.state = SaslState.FAILED
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}, True
        self.mechanism = mechanism
        if mechanism == PLAIN:
            self._exchange = PlainServerExchange(self.settings.plain_users)
        elif mechanism == OAUTHBEARER:
            assert self.settings.oauth is not None, "OAUTHBEARER is enabled without its validation"
            self._exchange = OAuthBearerServerExchange(self.settings.oauth.validate)
        else:
            self._exchange = ScramServerExchange(mechanism, self.settings.scram_credentials)
        self.state = SaslState.AUTHENTICATE
        return {"error_code": ErrorCode.NONE, "mechanisms": enabled}, False

    def wait_before(self, auth_bytes: bytes) -> Awaitable[None] | None:
        """What the shell must wait for before ``authenticate`` can check ``auth_bytes`` (the
        OAUTHBEARER token's signing key being fetched), or None."""
        if isinstance(self._exchange, OAuthBearerServerExchange) and self.settings.oauth is not None:
            return self.settings.oauth.wait_before(bytes(auth_bytes))
        return None

    def authenticate(
        self, version: int, auth_bytes: bytes, now_ms: int, wall_ms: int = 0
    ) -> tuple[dict[str, Any], bool]:
        """SaslAuthenticate: (response body, close the connection after answering)."""
        if self.state is not SaslState.AUTHENTICATE or self._exchange is None:
            self.state = SaslState.FAILED
            return _auth_error(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate is not expected now"), True
        exchange = self._exchange
        try:
            if isinstance(exchange, OAuthBearerServerExchange):
                answer = exchange.step(bytes(auth_bytes), wall_ms)
            else:
                answer = exchange.step(bytes(auth_bytes))
        except AuthenticationFailed as exc:
            self.state = SaslState.FAILED
            self.failure_reason = exc.reason or str(exc)
            return _auth_error(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)), True
        body: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "auth_bytes": answer,
            "session_lifetime_ms": 0,
        }
        if not exchange.complete:
            return body, False
        assert exchange.username is not None
        principal = user(exchange.username)
        if self._reauth and principal != self.principal:
            self.state = SaslState.FAILED
            return _auth_error(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot change principals during re-authentication from {self.principal}: {principal}",
            ), True
        if self._reauth:
            self.reauthentications += 1
        self.principal = principal
        self.state = SaslState.COMPLETE
        self._exchange = None
        self._reauth = False
        reauth_ms = self.settings.reauth_ms
        if reauth_ms > 0 and version >= 1:
            expiry = getattr(exchange, "credential_expiry_ms", None)
            if expiry is not None:  # the token's end, if sooner (at least 1 ms: 0 would mean never)
                reauth_ms = max(1, min(reauth_ms, expiry - wall_ms))
            body["session_lifetime_ms"] = reauth_ms
            self.session_expiry_ms = now_ms + reauth_ms
        else:
            self.session_expiry_ms = None
        return body, False


def _auth_error(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}
