"""SASL, sans-IO: the server's authenticator against pylog's client exchanges (PLAIN, SCRAM),
failures, re-authentication; JAAS parsing; SCRAM credentials; principals from certificates."""

from __future__ import annotations

import pytest
from pylog.protocol.errors import ErrorCode
from scramp import ScramClient

from pylog.config import ConfigError
from pylog.security.client import ClientSecurity, SaslClientExchange
from pylog.security.jaas import parse_jaas
from pylog.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    distinguished_name,
    parse_mapping_rules,
    parse_super_users,
    ssl_principal,
)
from pylog.security.sasl_server import SaslAuthenticator, SaslServerSettings, SaslState
from pylog.security.scram import (
    AuthenticationFailed,
    ScramMechanismType,
    ScramServerExchange,
    make_credential,
    parse_add_scram,
)

SHA256, SHA512 = ScramMechanismType.SCRAM_SHA_256, ScramMechanismType.SCRAM_SHA_512
CREDS = {
    ("alice", SHA256): make_credential(SHA256, "alice-secret"),
    ("alice", SHA512): make_credential(SHA512, "s5"),
}


def settings(reauth_ms: int = 0) -> SaslServerSettings:
    return SaslServerSettings(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        {"bob": "bob-secret"},
        lambda name, mech: CREDS.get((name, mech)),
        reauth_ms,
    )


def run(auth: SaslAuthenticator, mechanism: str, user: str, password: str, version: int = 1, now: int = 0):
    body, close = auth.handshake(mechanism)
    assert body["error_code"] == 0 and not close
    exchange = SaslClientExchange(mechanism, user, password)
    token = exchange.first()
    while True:
        body, close = auth.authenticate(version, token, now)
        if body["error_code"] or close:
            return body, close
        token = exchange.next(body["auth_bytes"])
        if token is None:
            return body, close


@pytest.mark.parametrize(
    "mechanism,user,password",
    [
        ("PLAIN", "bob", "bob-secret"),
        ("SCRAM-SHA-256", "alice", "alice-secret"),
        ("SCRAM-SHA-512", "alice", "s5"),
    ],
)
def test_right_credentials(mechanism, user, password):
    auth = SaslAuthenticator(settings())
    body, close = run(auth, mechanism, user, password)
    assert body["error_code"] == 0 and not close
    assert auth.authenticated and auth.principal == KafkaPrincipal("User", user)
    assert auth.session_expiry_ms is None


@pytest.mark.parametrize(
    "mechanism,user,password",
    [
        ("PLAIN", "bob", "wrong"),
        ("PLAIN", "nobody", "bob-secret"),
        ("SCRAM-SHA-256", "alice", "wrong"),
        ("SCRAM-SHA-256", "nobody", "x"),
        ("SCRAM-SHA-512", "alice", "alice-secret"),  # the 256 password against the 512 credential
    ],
)
def test_wrong_credentials_fail_and_close(mechanism, user, password):
    auth = SaslAuthenticator(settings())
    body, close = run(auth, mechanism, user, password)
    assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and close
    assert "Authentication failed" in body["error_message"]
    assert auth.state is SaslState.FAILED and auth.principal is None


def test_unsupported_mechanism():
    auth = SaslAuthenticator(settings())
    body, close = auth.handshake("GSSAPI")
    assert body["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM and close
    assert body["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_authenticate_before_handshake_is_illegal():
    auth = SaslAuthenticator(settings())
    body, close = auth.authenticate(1, b"\x00bob\x00bob-secret", 0)
    assert body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and close


@pytest.mark.parametrize(
    "token,message",
    [
        (b"bob\x00bob-secret", "expected 3 tokens"),
        (b"\x00\x00bob-secret", "username not specified"),
        (b"\x00bob\x00", "password not specified"),
        (b"eve\x00bob\x00bob-secret", "authorization id that is different"),
    ],
)
def test_plain_malformed(token, message):
    auth = SaslAuthenticator(settings())
    auth.handshake("PLAIN")
    body, close = auth.authenticate(1, token, 0)
    assert close and message in body["error_message"]


def test_scram_authorization_id_is_refused():
    exchange = ScramServerExchange("SCRAM-SHA-256", lambda n, m: CREDS.get((n, m)))
    client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    first = client.get_client_first().replace("n,,", "n,a=mallory,", 1)
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        exchange.step(first.encode())


def test_reauthentication_keeps_the_principal_and_renews_the_session():
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    body, _ = run(auth, "SCRAM-SHA-256", "alice", "alice-secret", now=5000)
    assert body["session_lifetime_ms"] == 1000 and auth.session_expiry_ms == 6000
    assert not auth.expired(5999) and auth.expired(6000)
    body, close = run(auth, "SCRAM-SHA-256", "alice", "alice-secret", now=5900)
    assert body["error_code"] == 0 and not close
    assert auth.reauthentications == 1 and auth.session_expiry_ms == 6900


def test_reauthentication_as_someone_else_fails():
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    run(auth, "PLAIN", "bob", "bob-secret")
    CREDS_PLAIN = {"bob": "bob-secret", "carol": "c"}
    auth.settings = SaslServerSettings(("PLAIN",), CREDS_PLAIN, lambda n, m: None, 1000)
    body, close = run(auth, "PLAIN", "carol", "c")
    assert body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and close
    assert "Cannot change principals" in body["error_message"]


def test_reauthentication_with_another_mechanism_is_refused():
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    run(auth, "PLAIN", "bob", "bob-secret")
    body, close = auth.handshake("SCRAM-SHA-256")
    assert body["error_code"] == ErrorCode.ILLEGAL_SASL_STATE and close


def test_version_0_gets_no_session_lifetime():
    auth = SaslAuthenticator(settings(reauth_ms=1000))
    body, _ = run(auth, "PLAIN", "bob", "bob-secret", version=0)
    assert body["session_lifetime_ms"] == 0 and auth.session_expiry_ms is None


# --- JAAS ---------------------------------------------------------------------------------------


def test_jaas_plain_users():
    entry = parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_bob="b\\"ob";'
    )
    assert entry.login_module.endswith("PlainLoginModule") and entry.control_flag == "required"
    assert entry.options["username"] == "admin"
    assert entry.plain_users == {"admin": "admin-secret", "bob": 'b"ob'}


@pytest.mark.parametrize(
    "text",
    [
        'PlainLoginModule required user_a="x"',  # no semicolon
        'PlainLoginModule always user_a="x";',  # bad flag
        "PlainLoginModule required user_a=;",
        'PlainLoginModule required user_a="x;',
        "A required; B required;",
    ],
)
def test_jaas_malformed(text):
    with pytest.raises(ConfigError):
        parse_jaas(text)


# --- SCRAM credentials ------------------------------------------------------------------------------


def test_add_scram_spec():
    name, cred = parse_add_scram('SCRAM-SHA-512=[name=alice,password="a,b",iterations=8192]')
    assert name == "alice" and cred.mechanism is SHA512 and cred.iterations == 8192
    exchange = ScramServerExchange("SCRAM-SHA-512", lambda n, m: cred if n == "alice" else None)
    client = ScramClient(["SCRAM-SHA-512"], "alice", "a,b")
    client.set_server_first(exchange.step(client.get_client_first().encode()).decode())
    client.set_server_final(exchange.step(client.get_client_final().encode()).decode())
    assert exchange.complete


@pytest.mark.parametrize(
    "spec",
    [
        "SCRAM-SHA-1=[name=a,password=b]",
        "SCRAM-SHA-256=[password=b]",
        "SCRAM-SHA-256=[name=a]",
        "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
        "SCRAM-SHA-256=[name=a,saltedpassword=AAAA]",
    ],
)
def test_add_scram_refused(spec):
    with pytest.raises(ConfigError):
        parse_add_scram(spec)


# --- principals ---------------------------------------------------------------------------------


CERT = {
    "subject": ((("countryName", "US"),), (("organizationName", "Example, Inc"),), (("commonName", "alice"),))
}


def test_certificate_subject_as_rfc2253():
    assert distinguished_name(CERT) == "CN=alice,O=Example\\, Inc,C=US"
    assert ssl_principal(CERT) == KafkaPrincipal("User", "CN=alice,O=Example\\, Inc,C=US")
    assert ssl_principal(None) == ANONYMOUS


def test_mapping_rules():
    rules = parse_mapping_rules("RULE:^CN=([a-z]+),.*$/$1/U, DEFAULT")
    assert ssl_principal(CERT, rules) == KafkaPrincipal("User", "ALICE")
    other = {"subject": ((("organizationName", "x"),),)}
    assert ssl_principal(other, rules) == KafkaPrincipal("User", "O=x")
    strict = parse_mapping_rules("RULE:^CN=(bob),.*$/$1/")
    with pytest.raises(PermissionError):
        ssl_principal(CERT, strict)


def test_super_users():
    assert parse_super_users("User:admin; User:CN=a,O=b") == {
        KafkaPrincipal("User", "admin"),
        KafkaPrincipal("User", "CN=a,O=b"),
    }
    with pytest.raises(ConfigError):
        parse_super_users("admin")


# --- client settings ---------------------------------------------------------------------------


def test_client_security_from_config():
    sec = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "x",
        }
    )
    assert sec.uses_sasl and not sec.uses_ssl and sec.username == "alice"
    jaas = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="bob" password="b";',
        }
    )
    assert (jaas.username, jaas.password) == ("bob", "b")
    for bad in (
        {"security.protocol": "TLS"},
        {"sasl.mechanisms": "PLAIN", "security.protocol": "SASL_SSL"},
        {"bogus.setting": "1"},
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.username": "a",
            "sasl.password": "b",
        },
    ):
        with pytest.raises(ValueError):
            ClientSecurity.from_config(bad)
