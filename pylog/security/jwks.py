"""The keys of a JWKS endpoint (``sasl.oauthbearer.jwks.endpoint.url``), fetched and kept fresh on
the event loop for the OAUTHBEARER validator.

The first fetch starts with the listener; a failed fetch is retried after
``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``, doubling up to ``...retry.backoff.max.ms``;
once fetched the keys are fetched again every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``. A token
naming a key id not known yet triggers a refresh at once (the provider rotated its keys), at most
once a minute per key id and for at most 16 ids, as Kafka does, so that tokens with made-up key ids
cannot make the broker hammer the endpoint. The HTTP request runs in a thread; the loop never waits
on it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from collections import OrderedDict
from typing import Any

from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from pylog.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

MISSING_KEY_ID_INTERVAL_S = 60.0
MISSING_KEY_ID_MAX_ENTRIES = 16
MISSING_KEY_ID_MAX_LENGTH = 60
FETCH_TIMEOUT_S = 10.0


def parse_jwks(body: bytes) -> KeySet:
    """The signing keys of a JWKS document; keys pylog cannot use (another ``use``, an unknown
    ``kty``) are left out. Raises ValueError when nothing usable is left."""
    doc = json.loads(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError("the JWKS document has no 'keys' list")
    usable = []
    for key in doc["keys"]:
        if not isinstance(key, dict) or key.get("use", "sig") != "sig" or key.get("kty") == "oct":
            continue
        try:
            usable.append(KeySet.import_key_set({"keys": [key]}).keys[0])
        except (JoseError, ValueError, TypeError) as exc:
            log.warning("JWKS: leaving out key %s: %s", key.get("kid"), exc)
    if not usable:
        raise ValueError("the JWKS document has no usable signing key")
    return KeySet(usable)


def fetch_url(url: str, timeout_s: float = FETCH_TIMEOUT_S) -> bytes:
    """GET ``url`` (blocking: run it in a thread)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body: bytes = response.read()
        return body


class JwksKeys:
    """A ``KeySource`` over a JWKS endpoint."""

    def __init__(self, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.url = url
        self.clock = clock
        self.refresh_s = max(refresh_ms, 1000) / 1000
        self.backoff_s = max(backoff_ms, 1) / 1000
        self.backoff_max_s = max(backoff_max_ms, backoff_ms, 1) / 1000
        self.fetches = 0  # successful fetches, for the log and the tests
        self._keys: KeySet | None = None
        self._kids: frozenset[str] = frozenset()
        self._missing: OrderedDict[str, float] = OrderedDict()  # kid -> when it last caused a refresh
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._fetched: asyncio.Future | None = None  # resolved by the next fetch's end
        self._stopped = False

    def keys(self) -> KeySet | None:
        return self._keys

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"jwks {self.url}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._stopped = True  # also ends a loop whose cancellation a finishing wait_for swallowed
        if self._wake is not None:
            self._wake.set()
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self._fetched is not None and not self._fetched.done():
            self._fetched.set_result(None)

    def refresh_for(self, kid: str | None) -> asyncio.Future | None:
        if self._task is None:
            return None
        if self._keys is None:  # the first fetch is still under way (or failing)
            return self._next_fetch()
        if kid is None or kid in self._kids or len(kid) > MISSING_KEY_ID_MAX_LENGTH:
            return None
        now = self.clock.monotonic_s()
        last = self._missing.get(kid)
        if last is not None and now - last < MISSING_KEY_ID_INTERVAL_S:
            return None
        self._missing[kid] = now
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KEY_ID_MAX_ENTRIES:
            self._missing.popitem(last=False)
        log.info("JWKS: a token names key id %r, not known: fetching %s again", kid, self.url)
        waiter = self._next_fetch()
        assert self._wake is not None
        self._wake.set()
        return waiter

    def _next_fetch(self) -> asyncio.Future:
        if self._fetched is None or self._fetched.done():
            self._fetched = asyncio.get_running_loop().create_future()
        return asyncio.shield(self._fetched)

    def _fetch_done(self) -> None:
        if self._fetched is not None and not self._fetched.done():
            self._fetched.set_result(None)

    async def _run(self) -> None:
        assert self._wake is not None
        backoff = self.backoff_s
        while not self._stopped:
            self._wake.clear()
            try:
                body = await asyncio.to_thread(fetch_url, self.url)
                keys = parse_jwks(body)
            except Exception as exc:  # any failure of the endpoint: keep the keys we have, retry
                if self._stopped:
                    break
                log.warning("JWKS: fetching %s failed: %s; retrying in %.1f s", self.url, exc, backoff)
                self._fetch_done()
                delay, backoff = backoff, min(backoff * 2, self.backoff_max_s)
            else:
                self._keys, self._kids = keys, frozenset(_kids(keys))
                self.fetches += 1
                log.info("JWKS: %d keys from %s (key ids %s)", len(keys.keys), self.url, sorted(self._kids))
                self._fetch_done()
                delay, backoff = self.refresh_s, self.backoff_s
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass


def _kids(keys: KeySet) -> list[str]:
    out: list[str] = []
    for key in keys.keys:
        kid: Any = key.kid
        if isinstance(kid, str):
            out.append(kid)
    return out
