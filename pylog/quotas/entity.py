"""Quota entities and keys (Kafka's ``ClientQuotaEntity`` and ``QuotaConfig``).

An entity is one or more ``(entity type, name)`` pairs: ``user`` and ``client-id`` (alone or
together) or ``ip`` (alone); a ``None`` name is the type's default (``<default>`` in Kafka's tools).
Each kind of entity takes its own keys: byte rates, request time and controller mutations for users
and client ids, the connection creation rate for addresses. Entities are kept as tuples of pairs
sorted by type, so equal entities compare and hash equal whatever order a request named them in.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from pylog.model import INT32_MAX, LONG_MAX

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# key -> Kafka's ConfigDef type of its value (integral types refuse fractions)
USER_CLIENT_KEYS: dict[str, str] = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
IP_KEYS: dict[str, str] = {CONNECTION_CREATION_RATE: "int"}
_INTEGRAL_MAX = {"int": INT32_MAX, "long": LONG_MAX}

QuotaEntity = tuple[tuple[str, "str | None"], ...]


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical form of an entity (pairs sorted by type)."""
    return tuple(sorted(pairs, key=lambda p: p[0]))


def describe(entity: QuotaEntity) -> str:
    """As Kafka prints an entity: ``user alice client-id app`` (``<default>`` for defaults)."""
    return " ".join(f"{t} {'<default>' if n is None else n}" for t, n in entity) or "<empty>"


def keys_for(entity: QuotaEntity) -> tuple[dict[str, str] | None, str | None]:
    """The keys an entity takes, or a reason (Kafka's message) why the entity is invalid."""
    types = [t for t, _ in entity]
    if not types:
        return None, "Invalid empty client quota entity"
    for t, name in entity:
        if t not in ENTITY_TYPES:
            return None, f"Unhandled client quota entity type: {t}"
        if name is not None and name == "":
            return None, f"Empty {t} not supported"
    if len(set(types)) != len(types):
        dup = next(t for t in types if types.count(t) > 1)
        return None, f"Invalid client quota entity, duplicate entity entry {dup}"
    if IP in types:
        if len(types) > 1:
            return None, (
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
            )
        name = dict(entity)[IP]
        if name is not None and not _is_address(name):
            return None, f"{name} is not a valid IP or resolvable host."
        return IP_KEYS, None
    return USER_CLIENT_KEYS, None


def check_value(keys: dict[str, str], key: str, value: float) -> str | None:
    """Kafka's validation of one quota value, or None when it is acceptable."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == "double":
        return None
    if value > _INTEGRAL_MAX[kind]:
        article = "an" if kind == "int" else "a"
        return f"Proposed value for {key} is too large for {article} {kind.upper()}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None


def _is_address(name: str) -> bool:
    """An IP address (pylog does not resolve host names here: the controller does no I/O)."""
    try:
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        return False
