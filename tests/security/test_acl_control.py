"""The controller's ACL and SCRAM commands, the records they produce, snapshots, bootstrap records
and connection counting."""

from __future__ import annotations

import random

import pytest
from pylog.protocol.errors import ErrorCode

from pylog.cluster.acl_control import ScramDeletion, ScramUpsertion
from pylog.cluster.bootstrap import log_is_empty, read_bootstrap, write_bootstrap
from pylog.cluster.controller import QuorumController
from pylog.cluster.image import MetadataImage
from pylog.cluster.records import decode_records, encode_records
from pylog.config import ConfigError
from pylog.security.acl import AclBinding, AclBindingFilter, AclPermissionType, PatternType
from pylog.security.acl_operations import AclOperation as Op
from pylog.security.acl_operations import ResourceType as RT
from pylog.security.quotas import ConnectionQuotas, parse_overrides
from pylog.security.scram import ScramMechanismType, make_credential, parse_add_scram, salted_password

ALLOW = AclPermissionType.ALLOW
SHA256 = ScramMechanismType.SCRAM_SHA_256


def controller() -> QuorumController:
    return QuorumController(rng=random.Random(7))


def commit(c: QuorumController, committed: MetadataImage, result) -> object:
    committed.apply_batch(decode_records(encode_records(result.records)), committed.offset + 1)
    return result.response


def read_acl(name: str = "t", pattern: int = PatternType.LITERAL) -> AclBinding:
    return AclBinding(RT.TOPIC, name, pattern, "User:alice", "*", Op.READ, ALLOW)


def test_create_describe_delete_acls():
    c, committed = controller(), MetadataImage()
    out = commit(c, committed, c.create_acls([read_acl(), read_acl("p-", PatternType.PREFIXED), read_acl()]))
    assert [r.error_code for r in out] == [0, 0, 0]
    assert len(committed.acls) == 2  # the same binding twice is one ACL
    out = commit(c, committed, c.delete_acls([AclBindingFilter(RT.TOPIC, "t", PatternType.LITERAL)]))
    assert [b.resource_name for b in out[0].deleted] == ["t"]
    assert [a.resource_name for a in committed.acls.values()] == ["p-"]
    again = commit(c, committed, c.delete_acls([AclBindingFilter(RT.TOPIC, "t", PatternType.LITERAL)]))
    assert again[0].deleted == () and again[0].error_code == 0


@pytest.mark.parametrize(
    "binding,message",
    [
        (AclBinding(RT.ANY, "t", PatternType.LITERAL, "User:a", "*", Op.READ, ALLOW), "resourceType"),
        (AclBinding(RT.TOPIC, "t", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW), "patternType"),
        (AclBinding(RT.TOPIC, "t", PatternType.LITERAL, "User:a", "*", Op.ANY, ALLOW), "operation"),
        (
            AclBinding(RT.TOPIC, "t", PatternType.LITERAL, "User:a", "*", Op.READ, AclPermissionType.ANY),
            "permission",
        ),
        (AclBinding(RT.TOPIC, "", PatternType.LITERAL, "User:a", "*", Op.READ, ALLOW), "empty"),
        (AclBinding(RT.TOPIC, "t", PatternType.LITERAL, "alice", "*", Op.READ, ALLOW), "principal"),
        (AclBinding(RT.CLUSTER, "c", PatternType.LITERAL, "User:a", "*", Op.ALTER, ALLOW), "kafka-cluster"),
    ],
)
def test_invalid_acls(binding, message):
    c = controller()
    result = c.create_acls([binding])
    assert result.records == ()
    assert (
        result.response[0].error_code == ErrorCode.INVALID_REQUEST
        and message in result.response[0].error_message
    )


def test_unknown_delete_filter():
    result = controller().delete_acls([AclBindingFilter(operation=Op.UNKNOWN)])
    assert result.response[0].error_code == ErrorCode.INVALID_REQUEST


def upsert(name: str, password: str, iterations: int = 4096, mech: int = SHA256) -> ScramUpsertion:
    salt = b"salt-" + name.encode()
    salted = salted_password(SHA256, password, salt, iterations)
    return ScramUpsertion(name, mech, iterations, salt, salted)


def test_scram_upsert_and_delete():
    c, committed = controller(), MetadataImage()
    out = commit(c, committed, c.alter_user_scram_credentials([], [upsert("alice", "pw")]))
    assert [(r.user, r.error_code) for r in out] == [("alice", 0)]
    stored = committed.scram_credential("alice", SHA256)
    assert stored == make_credential(SHA256, "pw", salt=b"salt-alice")  # the keys, not the password
    out = commit(c, committed, c.alter_user_scram_credentials([ScramDeletion("alice", SHA256)], []))
    assert out[0].error_code == 0 and committed.scram_credential("alice", SHA256) is None


@pytest.mark.parametrize(
    "deletions,upsertions,code",
    [
        ([ScramDeletion("nobody", SHA256)], [], ErrorCode.RESOURCE_NOT_FOUND),
        ([], [upsert("a", "p", iterations=100)], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("a", "p", iterations=20000)], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("a", "p", mech=0)], ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ([], [upsert("", "p")], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("a", "p"), upsert("a", "q")], ErrorCode.DUPLICATE_RESOURCE),
    ],
)
def test_scram_refusals(deletions, upsertions, code):
    result = controller().alter_user_scram_credentials(deletions, upsertions)
    assert result.records == () and result.response[0].error_code == code


def test_inactive_controller_answers_not_controller():
    c = QuorumController(rng=random.Random(1), active=False)
    assert c.create_acls([read_acl()]).response[0].error_code == ErrorCode.NOT_CONTROLLER
    assert (
        c.alter_user_scram_credentials([], [upsert("a", "p")]).response[0].error_code
        == ErrorCode.NOT_CONTROLLER
    )


def test_acls_and_credentials_survive_a_snapshot():
    c, committed = controller(), MetadataImage()
    commit(c, committed, c.create_acls([read_acl(), read_acl("x-", PatternType.PREFIXED)]))
    commit(c, committed, c.alter_user_scram_credentials([], [upsert("alice", "pw")]))
    restored = MetadataImage.from_records(
        committed.to_records(), offset=committed.offset, next_producer_id=0, last_broker_epoch=0
    )
    assert restored == committed
    assert set(restored.acls.values()) == {read_acl(), read_acl("x-", PatternType.PREFIXED)}


def test_bootstrap_file(tmp_path):
    _, cred = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    from pylog.cluster.records import UserScramCredentialRecord

    rec = UserScramCredentialRecord("alice", 1, cred.salt, cred.stored_key, cred.server_key, cred.iterations)
    path = write_bootstrap(tmp_path, [rec])
    assert path.stat().st_mode & 0o077 == 0
    assert read_bootstrap(tmp_path) == [rec]
    assert read_bootstrap(tmp_path / "none") == []
    assert log_is_empty(MetadataImage())
    image = MetadataImage()
    image.apply(rec)
    assert not log_is_empty(image)
    path.write_text("garbage")
    with pytest.raises(ConfigError):
        read_bootstrap(tmp_path)


def test_connection_quotas():
    q = ConnectionQuotas(
        max_connections=4, per_ip=2, per_ip_overrides={"10.0.0.9": 3}, per_listener={"SASL_SSL": 1}
    )
    assert q.admit("PLAINTEXT", "10.0.0.1") is None
    assert q.admit("PLAINTEXT", "10.0.0.1") is None
    assert "max.connections.per.ip" in q.admit("PLAINTEXT", "10.0.0.1")
    assert q.admit("SASL_SSL", "10.0.0.9") is None
    assert "listener.name.sasl_ssl.max.connections" in q.admit("SASL_SSL", "10.0.0.2")
    assert q.admit("PLAINTEXT", "10.0.0.2") is None
    assert "max.connections (4)" in q.admit("PLAINTEXT", "10.0.0.3")
    q.release("PLAINTEXT", "10.0.0.1")
    assert q.admit("PLAINTEXT", "10.0.0.3") is None
    assert q.refused == 3
    assert parse_overrides("10.0.0.1:5, [::1]:7") == {"10.0.0.1": 5, "::1": 7}
    with pytest.raises(ConfigError):
        parse_overrides("10.0.0.1")
