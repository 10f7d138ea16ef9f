"""The standard authorizer's decisions, table-driven: one row per (ACLs, caller, action, expected)."""

from __future__ import annotations

import pytest

from pylog.security.acl import AclBinding, AclBindingFilter, AclPermissionType, PatternType
from pylog.security.acl_operations import AclOperation as Op
from pylog.security.acl_operations import ResourceType as RT
from pylog.security.authorizer import AclIndex, StandardAuthorizer
from pylog.security.principal import KafkaPrincipal

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
ADMIN = KafkaPrincipal("User", "admin")


def acl(rt, name, pattern, principal, op, perm=ALLOW, host="*"):
    return AclBinding(rt, name, pattern, principal, host, op, perm)


# (id, acls, principal, host, operation, resource type, resource name, expected)
CASES = [
    ("no acls: denied", [], ALICE, "1.2.3.4", Op.READ, RT.TOPIC, "t", False),
    (
        "literal allow",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "literal allow other topic",
        [acl(RT.TOPIC, "u", LIT, "User:alice", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "other principal",
        [acl(RT.TOPIC, "t", LIT, "User:bob", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "wildcard principal",
        [acl(RT.TOPIC, "t", LIT, "User:*", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "wildcard resource",
        [acl(RT.TOPIC, "*", LIT, "User:alice", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "x",
        True,
    ),
    (
        "prefixed allow",
        [acl(RT.TOPIC, "sales-", PRE, "User:alice", Op.WRITE)],
        ALICE,
        "h",
        Op.WRITE,
        RT.TOPIC,
        "sales-eu",
        True,
    ),
    (
        "prefixed does not match shorter",
        [acl(RT.TOPIC, "sales-", PRE, "User:alice", Op.WRITE)],
        ALICE,
        "h",
        Op.WRITE,
        RT.TOPIC,
        "sales",
        False,
    ),
    (
        "prefixed literal name is not a prefix",
        [acl(RT.TOPIC, "sales-", LIT, "User:alice", Op.WRITE)],
        ALICE,
        "h",
        Op.WRITE,
        RT.TOPIC,
        "sales-eu",
        False,
    ),
    (
        "deny wins over allow",
        [
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ),
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ, DENY),
        ],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "prefixed deny wins over literal allow",
        [
            acl(RT.TOPIC, "secret", LIT, "User:*", Op.ALL),
            acl(RT.TOPIC, "sec", PRE, "User:alice", Op.READ, DENY),
        ],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "secret",
        False,
    ),
    (
        "deny of one op leaves others",
        [
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.ALL),
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.WRITE, DENY),
        ],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "deny ALL denies every op",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ), acl(RT.TOPIC, "t", LIT, "User:alice", Op.ALL, DENY)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "ALL allows",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.ALL)],
        ALICE,
        "h",
        Op.DELETE,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "READ implies DESCRIBE",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ)],
        ALICE,
        "h",
        Op.DESCRIBE,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "WRITE implies DESCRIBE",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.WRITE)],
        ALICE,
        "h",
        Op.DESCRIBE,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "DESCRIBE does not imply READ",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.DESCRIBE)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.ALTER_CONFIGS)],
        ALICE,
        "h",
        Op.DESCRIBE_CONFIGS,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "deny READ does not deny DESCRIBE",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.ALL), acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ, DENY)],
        ALICE,
        "h",
        Op.DESCRIBE,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "host match",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ, host="10.0.0.1")],
        ALICE,
        "10.0.0.1",
        Op.READ,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "host mismatch",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ, host="10.0.0.1")],
        ALICE,
        "10.0.0.2",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "deny from one host only",
        [
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ),
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.READ, DENY, host="10.0.0.9"),
        ],
        ALICE,
        "10.0.0.1",
        Op.READ,
        RT.TOPIC,
        "t",
        True,
    ),
    (
        "resource types are separate",
        [acl(RT.GROUP, "t", LIT, "User:alice", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        False,
    ),
    (
        "group read",
        [acl(RT.GROUP, "g", LIT, "User:alice", Op.READ)],
        ALICE,
        "h",
        Op.READ,
        RT.GROUP,
        "g",
        True,
    ),
    (
        "cluster action",
        [acl(RT.CLUSTER, "kafka-cluster", LIT, "User:alice", Op.CLUSTER_ACTION)],
        ALICE,
        "h",
        Op.CLUSTER_ACTION,
        RT.CLUSTER,
        "kafka-cluster",
        True,
    ),
    (
        "transactional id write",
        [acl(RT.TRANSACTIONAL_ID, "tx-", PRE, "User:alice", Op.WRITE)],
        ALICE,
        "h",
        Op.WRITE,
        RT.TRANSACTIONAL_ID,
        "tx-1",
        True,
    ),
    (
        "super user beats deny",
        [acl(RT.TOPIC, "t", LIT, "User:admin", Op.ALL, DENY)],
        ADMIN,
        "h",
        Op.READ,
        RT.TOPIC,
        "t",
        True,
    ),
]


@pytest.mark.parametrize("name,acls,principal,host,op,rt,resource,expected", CASES, ids=[c[0] for c in CASES])
def test_decision(name, acls, principal, host, op, rt, resource, expected):
    authz = StandardAuthorizer(AclIndex(acls), frozenset({ADMIN}))
    assert authz.authorize(principal, host, op, rt, resource) is expected


ALLOW_EVERYONE = [
    # (id, acls, expected for alice READ on topic t)
    ("no acls at all: allowed", [], True),
    ("acls on another resource only: allowed", [acl(RT.TOPIC, "u", LIT, "User:bob", Op.READ)], True),
    ("an acl for someone else on t: denied", [acl(RT.TOPIC, "t", LIT, "User:bob", Op.READ)], False),
    (
        "a prefixed acl covering t for someone else: denied",
        [acl(RT.TOPIC, "", PRE, "User:bob", Op.READ)],
        False,
    ),
    ("a wildcard acl for someone else: denied", [acl(RT.TOPIC, "*", LIT, "User:bob", Op.READ)], False),
]


@pytest.mark.parametrize("name,acls,expected", ALLOW_EVERYONE, ids=[c[0] for c in ALLOW_EVERYONE])
def test_allow_everyone_if_no_acl_found(name, acls, expected):
    authz = StandardAuthorizer(AclIndex(acls), frozenset(), allow_everyone_if_no_acl_found=True)
    assert authz.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t") is expected


BY_TYPE = [
    ("no acls", [], False),
    ("a literal write", [acl(RT.TOPIC, "t", LIT, "User:alice", Op.WRITE)], True),
    ("a prefixed write", [acl(RT.TOPIC, "a", PRE, "User:alice", Op.WRITE)], True),
    (
        "write denied on the same literal",
        [
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.WRITE),
            acl(RT.TOPIC, "t", LIT, "User:alice", Op.WRITE, DENY),
        ],
        False,
    ),
    (
        "write denied by a covering prefix",
        [
            acl(RT.TOPIC, "tx", LIT, "User:alice", Op.WRITE),
            acl(RT.TOPIC, "t", PRE, "User:alice", Op.WRITE, DENY),
        ],
        False,
    ),
    (
        "denied everywhere by the wildcard",
        [acl(RT.TOPIC, "t", LIT, "User:alice", Op.WRITE), acl(RT.TOPIC, "*", LIT, "User:*", Op.WRITE, DENY)],
        False,
    ),
    ("another user's write", [acl(RT.TOPIC, "t", LIT, "User:bob", Op.WRITE)], False),
]


@pytest.mark.parametrize("name,acls,expected", BY_TYPE, ids=[c[0] for c in BY_TYPE])
def test_authorize_by_resource_type(name, acls, expected):
    authz = StandardAuthorizer(AclIndex(acls), frozenset({ADMIN}))
    assert authz.authorize_by_resource_type(ALICE, "h", Op.WRITE, RT.TOPIC) is expected
    assert authz.authorize_by_resource_type(ADMIN, "h", Op.WRITE, RT.TOPIC) is True


FILTERS = [
    ("any matches all", AclBindingFilter(), 4),
    ("literal name", AclBindingFilter(RT.TOPIC, "sales-eu", PatternType.LITERAL), 1),
    ("prefixed pattern type", AclBindingFilter(RT.TOPIC, None, PatternType.PREFIXED), 1),
    (
        "match: literal, wildcard and covering prefixes",
        AclBindingFilter(RT.TOPIC, "sales-eu", PatternType.MATCH),
        3,
    ),
    ("principal", AclBindingFilter(principal="User:bob"), 1),
    ("operation", AclBindingFilter(operation=Op.WRITE), 1),
    ("permission", AclBindingFilter(permission_type=DENY), 1),
    ("resource type", AclBindingFilter(RT.GROUP), 0),
]


@pytest.mark.parametrize("name,f,count", FILTERS, ids=[c[0] for c in FILTERS])
def test_filters(name, f, count):
    acls = [
        acl(RT.TOPIC, "sales-eu", LIT, "User:alice", Op.READ),
        acl(RT.TOPIC, "sales-", PRE, "User:alice", Op.WRITE),
        acl(RT.TOPIC, "*", LIT, "User:bob", Op.READ),
        acl(RT.TOPIC, "other", LIT, "User:alice", Op.READ, DENY),
    ]
    assert sum(f.matches(a) for a in acls) == count


def test_unknown_filter_fields_are_reported():
    assert AclBindingFilter(operation=0).unknown() is not None
    assert AclBindingFilter(pattern_type=99).unknown() is not None
    assert AclBindingFilter().unknown() is None
