"""SASL/OAUTHBEARER, sans-IO: the client's first message, token checks against keys made here,
the server exchange through the authenticator (error message, then failure; session lifetime
bounded by the token), and the listener settings that turn it on."""

from __future__ import annotations

import json
from collections.abc import Awaitable

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, OctKey, RSAKey
from pylog.protocol.errors import ErrorCode

from pylog.config import BrokerConfig, ConfigError
from pylog.security.client import ClientSecurity, SaslClientExchange
from pylog.security.jwks import parse_jwks
from pylog.security.listener import listener_security, node_client_security
from pylog.security.oauthbearer import (
    LOGIN_MODULE,
    UNSECURED_VALIDATOR_CALLBACK_HANDLER,
    VALIDATOR_CALLBACK_HANDLER,
    InvalidToken,
    JwtRules,
    OAuthBearerValidation,
    UnknownKeyId,
    client_first,
    parse_client_first,
    validate_signed,
    validate_unsecured,
)
from pylog.security.principal import KafkaPrincipal
from pylog.security.sasl_server import SaslAuthenticator, SaslServerSettings
from pylog.security.scram import AuthenticationFailed

NOW_MS = 1_800_000_000_000
NOW = NOW_MS // 1000
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
OTHER = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
KEYS = KeySet.import_key_set({"keys": [KEY.as_dict(private=False)]})
RULES = JwtRules(("urn:kafka",), "https://issuer", clock_skew_s=30)


def claims(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "sub": "alice", "iat": NOW, "exp": NOW + 600, "aud": "urn:kafka", "iss": "https://issuer",
        "scope": "kafka write",
    }
    base.update(over)
    return {k: v for k, v in base.items() if v is not None}


def token(key: RSAKey = KEY, alg: str = "RS256", **over: object) -> str:
    return jwt.encode({"alg": alg, "kid": key.kid}, claims(**over), key)


def test_client_first_round_trips_with_authzid_and_extensions() -> None:
    msg = client_first("abc.def.ghi", "alice", {"traceId": "42"})
    assert msg == b"n,a=alice,\x01auth=Bearer abc.def.ghi\x01traceId=42\x01\x01"
    first = parse_client_first(msg)
    assert (first.token, first.authzid, dict(first.extensions)) == ("abc.def.ghi", "alice", {"traceId": "42"})
    assert parse_client_first(b"n,,\x01auth=Bearer t.o.k\x01\x01").token == "t.o.k"


@pytest.mark.parametrize(
    "msg",
    [b"", b"y,,\x01auth=Bearer x\x01\x01", b"n,,auth=Bearer x", b"n,,\x01auth=Basic x\x01\x01",
     b"n,,\x01traceId=1\x01\x01", b"n,b=x,\x01auth=Bearer x\x01\x01", b"n,,\x01auth=Bearer x\x01=1\x01\x01",
     b"\xff"],
)
def test_malformed_client_first_is_refused(msg: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match="Invalid OAUTHBEARER client first message"):
        parse_client_first(msg)


def test_a_good_token_gives_principal_scope_and_expiry() -> None:
    valid = validate_signed(token(), KEYS, RULES, NOW_MS)
    assert (valid.principal, valid.scope) == ("alice", ("kafka", "write"))
    assert valid.expiry_ms == (NOW + 600) * 1000


@pytest.mark.parametrize(
    "over,message",
    [
        ({"exp": NOW - 31}, "expired"),
        ({"nbf": NOW + 31}, "not valid before"),
        ({"iat": NOW + 31}, "issued in the future"),
        ({"exp": None}, "no exp claim"),
        ({"iat": None}, "no iat claim"),
        ({"exp": "soon"}, "not a number"),
        ({"aud": "urn:other"}, "audience"),
        ({"aud": ["urn:a", "urn:b"]}, "audience"),
        ({"iss": "https://evil"}, "issuer"),
        ({"sub": None}, "no sub claim"),
        ({"sub": "  "}, "no sub claim"),
    ],
)
def test_claims_outside_the_rules_are_refused(over: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidToken, match=message):
        validate_signed(token(**over), KEYS, RULES, NOW_MS)


def test_clock_skew_is_allowed_both_ways() -> None:
    validate_signed(token(exp=NOW - 29, iat=NOW - 600), KEYS, RULES, NOW_MS)
    validate_signed(token(nbf=NOW + 29, iat=NOW + 29), KEYS, RULES, NOW_MS)


def test_audience_list_and_configured_claims() -> None:
    rules = JwtRules(("urn:kafka",), None, sub_claim="client_id", scope_claim="scp")
    signed = token(aud=["urn:x", "urn:kafka"], client_id="svc", scp=["a", "b"])
    valid = validate_signed(signed, KEYS, rules, NOW_MS)
    assert valid.principal == "svc" and valid.scope == ("a", "b")


def test_signatures_are_checked() -> None:
    with pytest.raises(InvalidToken, match="does not verify"):
        validate_signed(token(OTHER), KEYS, RULES, NOW_MS)  # the right kid, another key
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k9"}, private=True)
    with pytest.raises(UnknownKeyId) as unknown:
        validate_signed(token(stranger), KEYS, RULES, NOW_MS)
    assert unknown.value.kid == "k9"
    # an HMAC token keyed with the public key's bytes must not pass (algorithm confusion)
    secret = OctKey.import_key(json.dumps(KEY.as_dict(private=False)).encode())
    hs = jwt.encode({"alg": "HS256", "kid": "k1"}, claims(), secret)
    with pytest.raises(InvalidToken):
        validate_signed(hs, KEYS, RULES, NOW_MS)


def unsigned(**over: object) -> str:
    import base64

    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims(**over))}."


def test_unsigned_tokens_only_for_the_unsecured_validator() -> None:
    with pytest.raises(InvalidToken):
        validate_signed(unsigned(), KEYS, RULES, NOW_MS)
    assert validate_unsecured(unsigned(), JwtRules(), NOW_MS).principal == "alice"
    with pytest.raises(InvalidToken, match="only unsigned"):
        validate_unsecured(token(), JwtRules(), NOW_MS)


class FixedKeys:
    """A key source that already holds its keys (the JWKS shell is tested with a real provider)."""

    def __init__(self, keys: KeySet | None) -> None:
        self._keys = keys

    def keys(self) -> KeySet | None:
        return self._keys

    def refresh_for(self, kid: str | None) -> Awaitable[None] | None:
        return None

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def authenticator(reauth_ms: int = 0, keys: KeySet | None = KEYS) -> SaslAuthenticator:
    oauth = OAuthBearerValidation(RULES, FixedKeys(keys))
    return SaslAuthenticator(SaslServerSettings(("OAUTHBEARER",), {}, lambda n, m: None, reauth_ms, oauth))


def test_authenticator_accepts_a_token_and_bounds_the_session_by_its_expiry() -> None:
    auth = authenticator(reauth_ms=3_600_000)
    assert auth.handshake("OAUTHBEARER")[0]["error_code"] == 0
    assert auth.wait_before(client_first(token())) is None
    body, close = auth.authenticate(1, client_first(token()), now_ms=5, wall_ms=NOW_MS)
    assert body["error_code"] == 0 and not close and body["auth_bytes"] == b""
    assert auth.principal == KafkaPrincipal("User", "alice")
    assert body["session_lifetime_ms"] == 600_000 and auth.session_expiry_ms == 600_005
    # re-authentication with a fresh token of the same principal
    assert auth.handshake("OAUTHBEARER")[0]["error_code"] == 0
    body, _ = auth.authenticate(1, client_first(token(exp=NOW + 7200)), now_ms=10, wall_ms=NOW_MS)
    assert body["error_code"] == 0 and body["session_lifetime_ms"] == 3_600_000
    assert auth.reauthentications == 1
    assert auth.handshake("OAUTHBEARER")[0]["error_code"] == 0
    body, close = auth.authenticate(1, client_first(token(sub="mallory")), now_ms=20, wall_ms=NOW_MS)
    assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and close


def test_refused_token_gets_the_error_message_then_fails() -> None:
    auth = authenticator()
    auth.handshake("OAUTHBEARER")
    body, close = auth.authenticate(1, client_first(token(aud="urn:other")), 0, NOW_MS)
    assert body["error_code"] == 0 and not close
    assert json.loads(body["auth_bytes"]) == {"status": "invalid_token"}
    body, close = auth.authenticate(1, b"\x01", 0, NOW_MS)
    assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and close
    assert "audience" in body["error_message"] and not auth.authenticated


def test_no_keys_yet_refuses() -> None:
    auth = authenticator(keys=None)
    auth.handshake("OAUTHBEARER")
    body, _ = auth.authenticate(1, client_first(token()), 0, NOW_MS)
    assert json.loads(body["auth_bytes"]) == {"status": "invalid_token"}


def test_jwks_documents() -> None:
    usable = KEY.as_dict(private=False)
    doc = {"keys": [usable, {"kty": "oct", "k": "c2VjcmV0"}, {"kty": "RSA", "use": "enc"}]}
    keys = parse_jwks(json.dumps(doc).encode())
    assert [k.kid for k in keys.keys] == ["k1"]
    with pytest.raises(ValueError, match="no usable signing key"):
        parse_jwks(b'{"keys": []}')
    with pytest.raises(ValueError):
        parse_jwks(b"[]")


def listener(**settings: str) -> BrokerConfig:
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    return BrokerConfig({**base, **settings})


def test_listener_settings() -> None:
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    cfg = listener(**{
        f"{prefix}sasl.server.callback.handler.class": VALIDATOR_CALLBACK_HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": "http://127.0.0.1:1/jwks",
        "sasl.oauthbearer.expected.audience": "urn:a, urn:b",
        "sasl.oauthbearer.expected.issuer": "https://issuer",
        f"{prefix}sasl.oauthbearer.sub.claim.name": "client_id",
    })
    sec = listener_security(cfg, "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda n, m: None)
    assert sec.sasl is not None and sec.sasl.oauth is not None and sec.sasl.oauth.keys is not None
    assert sec.sasl.oauth.rules == JwtRules(("urn:a", "urn:b"), "https://issuer", "client_id", "scope", 30)
    with pytest.raises(ConfigError, match=r"jwks\.endpoint\.url"):
        listener_security(listener(), "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda n, m: None)
    with pytest.raises(ConfigError, match=r"callback\.handler\.class"):
        listener_security(
            listener(**{f"{prefix}sasl.server.callback.handler.class": "com.example.Mine"}),
            "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda n, m: None,
        )
    unsecured = listener_security(
        listener(**{f"{prefix}sasl.server.callback.handler.class": UNSECURED_VALIDATOR_CALLBACK_HANDLER}),
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", lambda n, m: None,
    )
    assert unsecured.sasl is not None and unsecured.sasl.oauth is not None
    assert unsecured.sasl.oauth.keys is None


def test_client_settings_for_oauthbearer() -> None:
    librdkafka = ClientSecurity.from_config({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "svc", "sasl.oauthbearer.client.secret": "s",
        "sasl.oauthbearer.token.endpoint.url": "http://idp/token", "sasl.oauthbearer.scope": "kafka",
    })
    tokens = librdkafka.oauth
    assert tokens is not None and (tokens.client_id, tokens.scope) == ("svc", "kafka")
    java = ClientSecurity.from_config({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "http://idp/token",
        "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="svc2" clientSecret="s2" scope="a";',
    })
    assert java.oauth is not None and java.oauth.client_id == "svc2" and "s2" not in repr(java.oauth)
    with pytest.raises(ValueError, match=r"token\.endpoint\.url"):
        ClientSecurity.from_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"})
    with pytest.raises(ValueError, match="oidc"):
        ClientSecurity.from_config({
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "default",
        })


def test_client_exchange_acknowledges_an_error_message() -> None:
    exchange = SaslClientExchange("OAUTHBEARER", "", "a.b.c")
    assert exchange.first() == b"n,,\x01auth=Bearer a.b.c\x01\x01"
    assert exchange.next(b'{"status":"invalid_token"}') == b"\x01"
    accepted = SaslClientExchange("OAUTHBEARER", "", "a.b.c")
    accepted.first()
    assert accepted.next(b"") is None


def test_node_credentials_for_oauthbearer() -> None:
    cfg = BrokerConfig({
        "sasl.oauthbearer.token.endpoint.url": "http://idp/token",
        "listener.name.internal.oauthbearer.sasl.jaas.config":
            f'{LOGIN_MODULE} required clientId="node" clientSecret="node-secret";',
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
    })
    sec = node_client_security(cfg, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")
    assert sec.mechanism == "OAUTHBEARER" and sec.oauth is not None and sec.oauth.client_id == "node"
    bare = BrokerConfig({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="clientId"):
        node_client_security(bare, "INTERNAL", "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol")


class JwksServer:
    """A JWKS endpoint on loopback (http.server in a thread) whose keys the test changes."""

    def __init__(self, keys: list[RSAKey]) -> None:
        import http.server
        import threading

        self.keys, self.requests = keys, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                body = json.dumps({"keys": [k.as_dict(private=False) for k in outer.keys]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_jwks_keys_refresh_for_an_unknown_kid_once() -> None:
    """The first fetch is waited for; a token naming a new key id refetches once, a second token
    with the same unknown id does not (rate limited), a known id never does."""
    import asyncio

    from pylog.security.jwks import JwksKeys

    server = JwksServer([KEY])
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"}, private=True)

    async def scenario() -> None:
        keys = JwksKeys(server.url, refresh_ms=3_600_000, backoff_ms=10, backoff_max_ms=100)
        keys.start()
        try:
            first = keys.refresh_for("k1")
            assert first is not None
            await asyncio.wait_for(first, 10)
            assert keys.keys() is not None and keys.fetches == 1
            assert keys.refresh_for("k1") is None
            server.keys = [KEY, rotated]
            wait = keys.refresh_for("k2")
            assert wait is not None
            await asyncio.wait_for(wait, 10)
            current = keys.keys()
            assert current is not None and keys.fetches == 2
            assert validate_signed(token(rotated), current, RULES, NOW_MS).principal == "alice"
            assert keys.refresh_for("k3") is not None  # another unknown id: one more fetch
            assert keys.refresh_for("k3") is None  # but not twice within a minute
        finally:
            await keys.stop()

    try:
        asyncio.run(scenario())
    finally:
        server.close()
