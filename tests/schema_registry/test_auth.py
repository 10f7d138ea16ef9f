"""The registry's decisions without sockets: Basic credentials against PLAIN users and SCRAM
credentials, which listener the registry follows, and which topics authorize a subject."""

from __future__ import annotations

import base64

import pytest

from pylog.schema_registry.auth import (
    Authenticator,
    BasicValidator,
    Forbidden,
    SubjectAccess,
    Unauthenticated,
    choose_listener,
    parse_basic,
    subject_topics,
)
from pylog.security.acl import AclBinding, AclPermissionType, PatternType
from pylog.security.acl_operations import AclOperation, ResourceType
from pylog.security.authorizer import AclIndex, StandardAuthorizer
from pylog.security.listener import ListenerSecurity
from pylog.security.principal import user
from pylog.security.sasl_server import SaslServerSettings
from pylog.security.scram import ScramCredential, ScramMechanismType, make_credential, verify_password

SHA256 = ScramMechanismType.SCRAM_SHA_256
SHA512 = ScramMechanismType.SCRAM_SHA_512


def basic(name: str, password: str) -> str:
    return base64.b64encode(f"{name}:{password}".encode()).decode()


def settings(creds: dict[tuple[str, ScramMechanismType], ScramCredential], mechanisms: tuple[str, ...]) -> (
    SaslServerSettings
):
    return SaslServerSettings(mechanisms, {"bob": "bob-secret"}, lambda n, m: creds.get((n, m)))


def test_scram_password_verifies_against_its_stored_keys() -> None:
    cred = make_credential(SHA512, "s3cret", iterations=4096)
    assert verify_password(cred, "s3cret")
    assert not verify_password(cred, "s3cret ")
    assert not verify_password(make_credential(SHA256, "other"), "s3cret")


def test_basic_validator_takes_plain_and_scram_users() -> None:
    creds = {("alice", SHA256): make_credential(SHA256, "alice-secret"),
             ("carol", SHA512): make_credential(SHA512, "carol-secret")}
    v = BasicValidator(settings(creds, ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")))
    assert v(basic("bob", "bob-secret")) == user("bob")
    assert v(basic("alice", "alice-secret")) == user("alice")
    assert v(basic("alice", "alice-secret")) == user("alice")  # remembered, same answer
    assert v(basic("carol", "carol-secret")) == user("carol")
    for name, password in [("bob", "nope"), ("alice", "nope"), ("nobody", "x"), ("alice", "")]:
        with pytest.raises(Unauthenticated, match=name):
            v(basic(name, password))
    # a changed credential is checked again: the old password no longer passes
    creds[("alice", SHA256)] = make_credential(SHA256, "new-secret")
    with pytest.raises(Unauthenticated):
        v(basic("alice", "alice-secret"))
    assert v(basic("alice", "new-secret")) == user("alice")


def test_mechanisms_not_enabled_are_not_consulted() -> None:
    creds = {("alice", SHA256): make_credential(SHA256, "alice-secret")}
    only_plain = BasicValidator(settings(creds, ("PLAIN",)))
    with pytest.raises(Unauthenticated):
        only_plain(basic("alice", "alice-secret"))
    only_scram = BasicValidator(settings(creds, ("SCRAM-SHA-256",)))
    with pytest.raises(Unauthenticated):
        only_scram(basic("bob", "bob-secret"))


NO_COLON, NO_NAME = base64.b64encode(b"no-colon").decode(), base64.b64encode(b":pw").decode()


@pytest.mark.parametrize("raw", ["!!!", NO_COLON, NO_NAME])
def test_malformed_basic_credentials(raw: str) -> None:
    with pytest.raises(Unauthenticated):
        parse_basic(raw)


def test_authenticator_schemes_and_certificates() -> None:
    class Bearer:
        def __call__(self, credentials: str) -> object:
            if credentials != "good-token":
                raise Unauthenticated("bad token")
            return user("svc")

    a = Authenticator({"basic": BasicValidator(settings({}, ("PLAIN",))), "bearer": Bearer()})  # type: ignore[dict-item]
    assert a.authenticate("Basic " + basic("bob", "bob-secret"), None) == user("bob")
    assert a.authenticate("Bearer good-token", None) == user("svc")
    with pytest.raises(Unauthenticated, match="Digest"):
        a.authenticate("Digest abc", None)
    with pytest.raises(Unauthenticated, match="authentication required"):
        a.authenticate(None, {"subject": ((("commonName", "alice"),),)})  # certificates not accepted
    tls = Authenticator(certificates=True)
    cert = {"subject": ((("organizationName", "pylog tests"),), (("commonName", "alice"),))}
    assert tls.authenticate(None, cert) == user("CN=alice,O=pylog tests")
    assert a.challenge.startswith('Basic realm="')


def test_the_registry_follows_sasl_ssl_then_sasl_plaintext_then_ssl() -> None:
    plain = ListenerSecurity("PLAINTEXT", "PLAINTEXT")
    ssl_ = ListenerSecurity("SSL", "SSL")
    sasl = ListenerSecurity("SASL_SSL", "SASL_SSL")
    sasl2 = ListenerSecurity("OTHER", "SASL_PLAINTEXT")
    assert choose_listener([plain, ssl_, sasl, sasl2]) is sasl
    assert choose_listener([plain, sasl2, ssl_, sasl]) is sasl  # TLS keeps Basic passwords private
    assert choose_listener([plain, ssl_, sasl2]) is sasl2
    assert choose_listener([plain, ssl_]) is ssl_
    assert choose_listener([plain, None]) is None


def test_subjects_map_to_topics() -> None:
    assert subject_topics("orders-value") == ("orders", "orders-value")
    assert subject_topics("orders-key") == ("orders", "orders-key")
    assert subject_topics("shop.Order") == ("shop.Order",)
    assert subject_topics("-value") == ("-value",)


def _authorizer(*acls: tuple[str, str, int, int]) -> StandardAuthorizer:
    bindings = [
        AclBinding(ResourceType.TOPIC, name, pattern, "User:alice", "*", op, AclPermissionType.ALLOW)
        for name, _, pattern, op in acls
    ]
    return StandardAuthorizer(AclIndex(bindings), frozenset({user("admin")}))


def test_subject_access_by_topic_and_subject_acls() -> None:
    auth = _authorizer(("orders", "", PatternType.LITERAL, AclOperation.READ),
                       ("shop.", "", PatternType.PREFIXED, AclOperation.WRITE))
    alice = SubjectAccess(lambda op, rt, n: auth.authorize(user("alice"), "::1", op, rt, n), user("alice"))
    assert alice.may(AclOperation.READ, "orders-value")
    assert alice.may(AclOperation.DESCRIBE, "orders-key")  # READ implies DESCRIBE, as in Kafka
    assert not alice.may(AclOperation.WRITE, "orders-value")
    assert alice.may(AclOperation.WRITE, "shop.Order")  # the subject name as a prefixed topic resource
    assert alice.readable(["orders-value", "payments-value", "orders-key"]) == ["orders-value", "orders-key"]
    with pytest.raises(Forbidden, match="User:alice is not authorized to ALTER subject 'orders-value'"):
        alice.require(AclOperation.ALTER, "orders-value")
    with pytest.raises(Forbidden, match="cluster"):
        alice.require_cluster_alter()
    admin = SubjectAccess(lambda op, rt, n: auth.authorize(user("admin"), "::1", op, rt, n), user("admin"))
    admin.require(AclOperation.ALTER, "anything")
    admin.require_cluster_alter()
