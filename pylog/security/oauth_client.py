"""Access tokens for pylog's own OAUTHBEARER clients (the SDK, a node's connections to other
nodes): the OAuth 2 client_credentials grant at ``sasl.oauthbearer.token.endpoint.url``, the
client's id and secret in a Basic header (as librdkafka and Kafka's login handler send them).

A token is reused until 80% of its lifetime has passed (the refresh point librdkafka and Kafka's
clients use), so connections opened meanwhile, and re-authentications, do not ask the provider
again. The HTTP request runs in a thread; the event loop never waits on it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request

from pylog.clock import SYSTEM_CLOCK, Clock

REFRESH_FRACTION = 0.8
TOKEN_TIMEOUT_S = 10.0
DEFAULT_LIFETIME_S = 3600.0  # when the endpoint does not say (expires_in)


class TokenEndpointError(ConnectionError):
    """The token endpoint gave no access token; the message says what it answered."""


def request_token(url: str, client_id: str, client_secret: str, scope: str | None) -> tuple[str, float]:
    """(access token, lifetime in seconds) from the token endpoint; blocking (run it in a thread)."""
    form = {"grant_type": "client_credentials"}
    if scope:
        form["scope"] = scope
    basic = base64.b64encode(
        f"{urllib.parse.quote(client_id, safe='')}:{urllib.parse.quote(client_secret, safe='')}".encode()
    ).decode()
    request = urllib.request.Request(
        url,
        urllib.parse.urlencode(form).encode(),
        headers={
            "Authorization": f"Basic {basic}",
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TOKEN_TIMEOUT_S) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise TokenEndpointError(f"the token endpoint {url} answered {exc.code}: {detail}") from None
    except (OSError, ValueError) as exc:
        raise TokenEndpointError(f"cannot get a token from {url}: {exc}") from None
    token = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise TokenEndpointError(f"the token endpoint {url} answered without an access_token")
    lifetime = body.get("expires_in")
    known = isinstance(lifetime, (int, float)) and lifetime > 0
    return token, float(lifetime) if known else DEFAULT_LIFETIME_S


class ClientCredentialsTokens:
    """The current access token of one client, fetched again once 80% of its lifetime is gone."""

    def __init__(self, url: str, client_id: str, client_secret: str, scope: str | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.url, self.client_id, self.scope = url, client_id, scope
        self.clock = clock
        self._secret = client_secret
        self._token: str | None = None
        self._refresh_at = 0.0
        self._lock = threading.Lock()  # one request at a time, whichever loop or thread asks

    def __repr__(self) -> str:  # the secret stays out of logs
        return f"ClientCredentialsTokens({self.url!r}, client_id={self.client_id!r})"

    async def token(self) -> str:
        token = self._token
        if token is not None and self.clock.monotonic_s() < self._refresh_at:
            return token
        return await asyncio.to_thread(self._fetch)

    def token_blocking(self) -> str:
        """The current token for a caller that may block (a thread doing HTTP, e.g. a registry client)."""
        return self._fetch()

    def _fetch(self) -> str:
        with self._lock:
            if self._token is not None and self.clock.monotonic_s() < self._refresh_at:
                return self._token
            started = self.clock.monotonic_s()
            token, lifetime_s = request_token(self.url, self.client_id, self._secret, self.scope)
            self._token, self._refresh_at = token, started + lifetime_s * REFRESH_FRACTION
            return token
