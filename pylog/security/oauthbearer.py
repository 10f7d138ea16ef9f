"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768) on the server, sans-IO.

The client's one message is ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01]*\\x01``.
The token is a JWT whose signature is checked against the keys of the listener's JWKS endpoint
(``sasl.oauthbearer.jwks.endpoint.url``; fetched and refreshed by ``pylog.security.jwks``), then
its claims: ``exp`` and ``iat`` present, ``exp`` / ``nbf`` / ``iat`` within
``sasl.oauthbearer.clock.skew.seconds`` of now, ``aud`` one of
``sasl.oauthbearer.expected.audience`` and ``iss`` equal to ``sasl.oauthbearer.expected.issuer``
when those are set. The principal is ``User:<claim>`` of ``sasl.oauthbearer.sub.claim.name``.
Unsigned tokens (``alg: none``) are accepted only on a listener whose server callback handler is
Kafka's unsecured validator, which is meant for tests.

A refused token is answered, as Kafka does, with a server message ``{"status":"invalid_token"}``;
the client acknowledges it with ``\\x01`` and the exchange then fails with the reason.
Signature checks are joserfc's; nothing here reads a clock or does I/O (``now_ms`` is passed in).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from joserfc import jws, jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from pylog.security.scram import AuthenticationFailed

OAUTHBEARER = "OAUTHBEARER"
_PACKAGE = "org.apache.kafka.common.security.oauthbearer"
VALIDATOR_CALLBACK_HANDLER = f"{_PACKAGE}.OAuthBearerValidatorCallbackHandler"
UNSECURED_VALIDATOR_CALLBACK_HANDLER = f"{_PACKAGE}.OAuthBearerUnsecuredValidatorCallbackHandler"
# the names these classes had before Kafka 3.x moved them
VALIDATOR_CALLBACK_HANDLERS = (
    VALIDATOR_CALLBACK_HANDLER,
    f"{_PACKAGE}.secured.OAuthBearerValidatorCallbackHandler",
)
UNSECURED_VALIDATOR_CALLBACK_HANDLERS = (
    UNSECURED_VALIDATOR_CALLBACK_HANDLER,
    f"{_PACKAGE}.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler",
)
LOGIN_MODULE = f"{_PACKAGE}.OAuthBearerLoginModule"

SIGNING_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)
"""Asymmetric algorithms only: a JWKS publishes public keys, so an HMAC (HS256) token is refused."""

SEPARATOR = b"\x01"
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_BAD_FIRST = "Invalid OAUTHBEARER client first message"
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*)")


class InvalidToken(AuthenticationFailed):
    """The token was refused; the message says why (the broker logs it, the client is told it)."""


class UnknownKeyId(InvalidToken):
    def __init__(self, kid: str) -> None:
        super().__init__(f"no key with kid {kid!r} in the JWKS")
        self.kid = kid


@dataclass(frozen=True)
class ClientFirst:
    token: str
    authzid: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


def parse_client_first(message: bytes) -> ClientFirst:
    """The client's initial response; raises AuthenticationFailed when it is not one."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"{_BAD_FIRST}: not UTF-8") from None
    if not text.startswith("n,") or "," not in text[2:]:
        raise AuthenticationFailed(f"{_BAD_FIRST}: no GS2 header 'n,[a=...],'")
    authz, rest = text[2:].split(",", 1)
    if authz and not authz.startswith("a="):
        raise AuthenticationFailed(f"{_BAD_FIRST}: bad authzid in the GS2 header")
    if not rest.startswith("\x01") or not rest.endswith("\x01\x01"):
        raise AuthenticationFailed(f"{_BAD_FIRST}: key=value pairs not framed by \\x01")
    pairs: dict[str, str] = {}
    for kv in rest[1:-2].split("\x01"):
        key, eq, value = kv.partition("=")
        bad_value = key != "auth" and not _EXTENSION_VALUE.fullmatch(value)
        if not eq or not _EXTENSION_KEY.fullmatch(key) or bad_value:
            raise AuthenticationFailed(f"{_BAD_FIRST}: bad key=value pair {key!r}")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise AuthenticationFailed(f"{_BAD_FIRST}: no auth=Bearer <token>")
    bearer = _BEARER.fullmatch(auth)
    if bearer is None:
        raise AuthenticationFailed(f"{_BAD_FIRST}: auth is not 'Bearer <token>'")
    return ClientFirst(bearer.group(1), authz[2:], pairs)


def client_first(token: str, authzid: str = "", extensions: Mapping[str, str] | None = None) -> bytes:
    """The client's initial response for ``token`` (what pylog's own clients send)."""
    ext = "".join(f"{k}={v}\x01" for k, v in (extensions or {}).items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


@dataclass(frozen=True)
class JwtRules:
    """What a listener requires of a token's claims (Kafka's ``sasl.oauthbearer.*`` settings)."""

    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30


@dataclass(frozen=True)
class ValidToken:
    principal: str
    scope: tuple[str, ...]
    expiry_ms: int
    issued_ms: int


def token_key_id(token: str) -> str | None:
    """The ``kid`` of a token's header, unverified (which key to look for); None when it has none
    or is not a JWS."""
    try:
        kid = jws.extract_compact(token.encode()).headers().get("kid")
    except (JoseError, ValueError):
        return None
    return kid if isinstance(kid, str) else None


def validate_signed(token: str, keys: KeySet, rules: JwtRules, now_ms: int) -> ValidToken:
    """Check a signed token against ``keys`` and ``rules``; raises InvalidToken (UnknownKeyId when
    no key of ``keys`` has the token's kid)."""
    try:
        decoded = jwt.decode(token, keys, algorithms=SIGNING_ALGORITHMS)
    except InvalidKeyIdError:
        raise UnknownKeyId(token_key_id(token) or "") from None
    except JoseError as exc:
        raise InvalidToken(f"the token does not verify ({exc.error}: {exc.description})") from None
    except ValueError as exc:
        raise InvalidToken(f"the token is not a JWT: {exc}") from None
    return check_claims(decoded.claims, rules, now_ms)


def validate_unsecured(token: str, rules: JwtRules, now_ms: int) -> ValidToken:
    """An unsigned token (``alg: none``, empty signature), for listeners configured with Kafka's
    unsecured validator only."""
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        header, claims = (json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in parts[:2])
    except (ValueError, binascii.Error):
        raise InvalidToken("the token is not a JWT") from None
    if not isinstance(header, dict) or header.get("alg") != "none" or parts[2]:
        raise InvalidToken("the unsecured validator accepts only unsigned tokens (alg none)")
    if not isinstance(claims, dict):
        raise InvalidToken("the token's claims are not a JSON object")
    return check_claims(claims, rules, now_ms)


def _seconds(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"the token has no {name} claim")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"the token's {name} claim is not a number of seconds")
    return float(value)


def check_claims(claims: Mapping[str, Any], rules: JwtRules, now_ms: int) -> ValidToken:
    now, skew = now_ms / 1000, rules.clock_skew_s
    exp = _seconds(claims, "exp", True)
    iat = _seconds(claims, "iat", True)
    nbf = _seconds(claims, "nbf", False)
    assert exp is not None and iat is not None
    if now - skew >= exp:
        raise InvalidToken(f"the token expired at {exp:.0f} (now {now:.0f}, clock skew {skew} s)")
    if nbf is not None and now + skew < nbf:
        raise InvalidToken(f"the token is not valid before {nbf:.0f} (now {now:.0f}, clock skew {skew} s)")
    if now + skew < iat:
        raise InvalidToken(f"the token was issued in the future ({iat:.0f}, now {now:.0f}, skew {skew} s)")
    if rules.expected_audience:
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in rules.expected_audience for a in audiences):
            raise InvalidToken(f"the token's audience {aud!r} is none of {list(rules.expected_audience)}")
    if rules.expected_issuer is not None and claims.get("iss") != rules.expected_issuer:
        raise InvalidToken(f"the token's issuer {claims.get('iss')!r} is not {rules.expected_issuer!r}")
    principal = claims.get(rules.sub_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidToken(f"the token has no {rules.sub_claim} claim naming the principal")
    scope = claims.get(rules.scope_claim)
    scopes = tuple(scope.split()) if isinstance(scope, str) else tuple(str(s) for s in scope or ())
    return ValidToken(principal.strip(), scopes, int(exp * 1000), int(iat * 1000))


class KeySource(Protocol):
    """A listener's verification keys, kept by the asyncio shell (``pylog.security.jwks``)."""

    def keys(self) -> KeySet | None:
        """The keys known now (None before the first fetch succeeded)."""

    def refresh_for(self, kid: str | None) -> Awaitable[None] | None:
        """A refresh to wait for before checking a token with ``kid`` (the key is not known yet and
        a refresh is allowed now), or None."""

    def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class OAuthBearerValidation:
    """How a listener checks OAUTHBEARER tokens: signed ones against ``keys``, or (``keys`` None:
    Kafka's unsecured validator configured) unsigned ones."""

    rules: JwtRules
    keys: KeySource | None

    def validate(self, token: str, now_ms: int) -> ValidToken:
        if self.keys is None:
            return validate_unsecured(token, self.rules, now_ms)
        current = self.keys.keys()
        if current is None:
            raise InvalidToken("the JWKS endpoint's keys could not be fetched yet")
        return validate_signed(token, current, self.rules, now_ms)

    def wait_before(self, message: bytes) -> Awaitable[None] | None:
        """What to wait for before the client's ``message`` can be checked: a JWKS refresh when its
        token names a key not known yet."""
        if self.keys is None:
            return None
        try:
            token = parse_client_first(message).token
        except AuthenticationFailed:
            return None
        return self.keys.refresh_for(token_key_id(token))


def error_response(status: str = "invalid_token", scope: str | None = None) -> bytes:
    """RFC 7628's server error message, as Kafka words it."""
    body: dict[str, str] = {"status": status}
    if scope:
        body["scope"] = scope
    return json.dumps(body, separators=(",", ":")).encode()


class OAuthBearerServerExchange:
    """One exchange: the client's initial response, answered empty (accepted) or with the error
    message; after an error the client's ``\\x01`` ends it as failed."""

    def __init__(self, validate: Callable[[str, int], ValidToken]) -> None:
        self._validate = validate
        self._error: str | None = None
        self.username: str | None = None
        self.credential_expiry_ms: int | None = None
        self.complete = False

    def step(self, message: bytes, now_ms: int) -> bytes:
        if self._error is not None:
            failed = AuthenticationFailed(f"Authentication failed: {self._error}")
            failed.reason = self._error
            raise failed
        first = parse_client_first(message)
        try:
            token = self._validate(first.token, now_ms)
        except InvalidToken as exc:
            self._error = str(exc)
            return error_response()
        if first.authzid and first.authzid != token.principal:
            raise AuthenticationFailed(
                f"Authentication failed: the authorization id {first.authzid!r} is not the token's "
                f"principal {token.principal!r}"
            )
        self.username = token.principal
        self.credential_expiry_ms = token.expiry_ms
        self.complete = True
        return b""
