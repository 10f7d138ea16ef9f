"""Bearer tokens at the registry: a listener with OAUTHBEARER makes the registry accept
``Authorization: Bearer`` checked by that listener's own validation (here Kafka's unsecured
validator, whose unsigned tokens need no key set), and its 401 challenges with both schemes."""

from __future__ import annotations

import base64
import json

import pytest

from pylog.clock import ManualClock
from pylog.schema_registry.auth import Unauthenticated, registry_security
from pylog.security.listener import ListenerSecurity
from pylog.security.oauthbearer import OAUTHBEARER, JwtRules, OAuthBearerValidation
from pylog.security.principal import user
from pylog.security.sasl_server import SaslServerSettings

NOW_MS = 1_800_000_000_000


def unsigned(claims: dict) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(claims)}."


def claims(**overrides: object) -> dict:
    now = NOW_MS // 1000
    return {"sub": "alice", "iat": now, "exp": now + 300, "aud": "pylog", **overrides}


def listener(oauth: bool) -> ListenerSecurity:
    validation = OAuthBearerValidation(JwtRules(expected_audience=("pylog",)), keys=None)
    mechanisms = ("SCRAM-SHA-256", OAUTHBEARER) if oauth else ("SCRAM-SHA-256",)
    sasl = SaslServerSettings(mechanisms, {}, lambda _name, _kind: None, oauth=validation if oauth else None)
    return ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", sasl=sasl)


def test_a_bearer_token_is_checked_as_the_listener_checks_oauthbearer() -> None:
    auth = registry_security([listener(True)], None, clock=ManualClock(wall_ms=NOW_MS)).authenticator
    assert auth is not None
    assert auth.challenge == 'Basic realm="pylog schema registry", Bearer realm="pylog schema registry"'
    assert auth.authenticate(f"Bearer {unsigned(claims())}", None) == user("alice")
    assert auth.wait_before(f"Bearer {unsigned(claims())}") is None  # no key set to refresh
    with pytest.raises(Unauthenticated, match="audience"):
        auth.authenticate(f"Bearer {unsigned(claims(aud='elsewhere'))}", None)
    with pytest.raises(Unauthenticated, match="expired"):
        auth.authenticate(f"Bearer {unsigned(claims(exp=NOW_MS // 1000 - 3600))}", None)
    with pytest.raises(Unauthenticated, match="no bearer token"):
        auth.authenticate("Bearer ", None)


def test_without_oauthbearer_only_basic_is_offered() -> None:
    auth = registry_security([listener(False)], None).authenticator
    assert auth is not None
    assert auth.challenge == 'Basic realm="pylog schema registry"'
    with pytest.raises(Unauthenticated, match="Bearer authentication scheme is not accepted"):
        auth.authenticate(f"Bearer {unsigned(claims())}", None)
