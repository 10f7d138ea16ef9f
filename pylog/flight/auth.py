"""Who calls the Flight server: ``Authorization: Basic`` with a SASL user of the broker's listener
on every call, or a bearer token the server issued.

Flight's basic-token handshake (``FlightClient.authenticate_basic_token``, and what ADBC's Flight
SQL driver does with a username and password) sends Basic credentials to Handshake once; the server
answers an ``authorization: Bearer <token>`` header that the client then sends instead. A token
names the principal that authenticated; it lasts while it is used (`TOKEN_IDLE_MS` between calls)
on the server that issued it.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

import pyarrow.flight as flight

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.schema_registry.auth import Authenticator, Unauthenticated
from pylog.security.principal import KafkaPrincipal

TOKEN_IDLE_MS = 3_600_000  # a token unused this long is gone
MAX_TOKENS = 10_000  # tokens kept per server; the least recently used go first


def basic_padded(authorization: str) -> str:
    """``Basic <base64>`` with its base64 padding restored: some Flight clients (Go's) send it
    unpadded."""
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return authorization
    credentials = credentials.strip()
    return f"{scheme} {credentials}{'=' * (-len(credentials) % 4)}"


class BearerTokens:
    """The tokens one Flight server issued: token -> (principal, last use)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.now_ms = clock.wall_ms
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[KafkaPrincipal | None, int]] = {}

    def issue(self, principal: KafkaPrincipal | None) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = self.now_ms()
            for key in [k for k, (_, used) in self._tokens.items() if now - used > TOKEN_IDLE_MS]:
                del self._tokens[key]
            while len(self._tokens) >= MAX_TOKENS:
                del self._tokens[next(iter(self._tokens))]
            self._tokens[token] = (principal, now)
        return token

    def principal(self, token: str) -> tuple[bool, KafkaPrincipal | None]:
        """(known, principal) of a token; a token used is kept for another `TOKEN_IDLE_MS`."""
        with self._lock:
            found = self._tokens.pop(token, None)
            now = self.now_ms()
            if found is None or now - found[1] > TOKEN_IDLE_MS:
                return False, None
            self._tokens[token] = (found[0], now)  # moved to the end: least recently used first
            return True, found[0]


class Caller(flight.ServerMiddleware):
    """The caller of one Flight call; on a Handshake, the token it is given."""

    def __init__(self, principal: KafkaPrincipal | None, token: str | None = None) -> None:
        self.principal = principal
        self.token = token

    def sending_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token else {}


class AuthFactory(flight.ServerMiddlewareFactory):
    """Authenticates every call (see the module doc). Without an authenticator (a broker whose
    listeners do not authenticate) every caller is let in, and a Handshake still answers a token so
    that clients which insist on one carry on."""

    def __init__(self, authenticator: Authenticator | None, tokens: BearerTokens, *,
                 certificates: bool = False) -> None:
        """``certificates``: a call without credentials is let in, for the server to name it by its
        TLS client certificate (behind `pylog.flight.tls_front.TlsFront`)."""
        self.authenticator = authenticator
        self.tokens = tokens
        self.certificates = certificates

    def start_call(self, info: Any, headers: dict[str, list[str]]) -> Caller:
        principal = self._principal(headers)
        if info.method == flight.FlightMethod.HANDSHAKE:
            return Caller(principal, self.tokens.issue(principal))
        return Caller(principal)

    def _principal(self, headers: dict[str, list[str]]) -> KafkaPrincipal | None:
        if self.authenticator is None:
            return None
        values = headers.get("authorization") or headers.get("Authorization") or []
        authorization = values[0] if values else None
        if authorization:
            scheme, _, credentials = authorization.strip().partition(" ")
            if scheme.lower() == "bearer":
                known, principal = self.tokens.principal(credentials.strip())
                if known:
                    return principal
            authorization = basic_padded(authorization)
        elif self.certificates and self.authenticator.certificates:
            return None  # named by its client certificate
        try:
            return self.authenticator.authenticate(authorization, None)
        except Unauthenticated as exc:
            raise flight.FlightUnauthenticatedError(str(exc)) from None


class HandshakeAuth(flight.ServerAuthHandler):
    """Lets Handshake succeed: `AuthFactory` has authenticated the call and answers its token."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        return None

    def is_valid(self, token: bytes) -> bytes:
        return b""  # calls are authenticated by their Authorization header, not Flight's token header
