"""Client quota commands of the controller (AlterClientQuotas), sans-IO: validate against the
working image, emit ``ClientQuotaRecord``s; and the DescribeClientQuotas filter every broker
answers from its image.

Kafka's rules: each entry names an entity and its operations; an entity named twice in one request,
or a key set twice for one entity, fails that entity with INVALID_REQUEST. An entity is ``user``
and / or ``client-id``, or ``ip`` alone, each name a string or None (the default); every value must
be positive, and whole for the integral keys (byte rates, connection creation rate). Removing a key
that is not set, or setting the value already set, writes nothing. Valid entities of a request
commit together, in one batch; ``validate_only`` writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pylog.cluster.image import MetadataImage
from pylog.cluster.records import ClientQuotaRecord, MetadataRecord
from pylog.protocol.errors import ErrorCode
from pylog.quotas.entity import CLIENT_ID, ENTITY_TYPES, IP, USER, QuotaEntity, check_value, keys_for

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass(frozen=True)
class QuotaOp:
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True)
class QuotaAlteration:
    entity: tuple[tuple[str, str | None], ...]  # as the request named it (order kept for the answer)
    ops: Sequence[QuotaOp]


@dataclass(frozen=True)
class QuotaAlterationResult:
    entity: tuple[tuple[str, str | None], ...]
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


def canonical(entity: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(entity, key=lambda p: p[0]))


class QuotaControl:
    def __init__(
        self, image: Callable[[], MetadataImage], collect: Callable[[list[MetadataRecord]], None]
    ) -> None:
        self._image = image
        self._collect = collect

    def alter(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool
    ) -> list[QuotaAlterationResult]:
        """One result per entity named (in the order first named); an entity named twice fails."""
        named: dict[QuotaEntity, list[QuotaAlteration]] = {}
        for alt in alterations:
            named.setdefault(canonical(alt.entity), []).append(alt)
        records: list[MetadataRecord] = []
        results = []
        for entity, alts in named.items():
            if len(alts) > 1:
                problem: str | None = f"Ignoring duplicate entity {_show(entity)}"
            else:
                problem, changes = self._changes(alts[0])
                records.extend(changes)
            code = ErrorCode.NONE if problem is None else ErrorCode.INVALID_REQUEST
            results.append(QuotaAlterationResult(alts[0].entity, code, problem))
        if not validate_only:
            self._collect(records)
        return results

    def _changes(self, alt: QuotaAlteration) -> tuple[str | None, list[ClientQuotaRecord]]:
        entity = canonical(alt.entity)
        keys, problem = keys_for(entity)
        if keys is None:
            return problem, []
        wanted: dict[str, float | None] = {}
        for op in alt.ops:
            if op.key in wanted:
                return f"Duplicate quota key {op.key} not updating quota for this entity {_show(entity)}", []
            wanted[op.key] = None if op.remove else op.value
        current = self._image().client_quotas.get(entity, {})
        out = []
        for key, value in wanted.items():
            if value is None:
                if key in current:
                    out.append(ClientQuotaRecord(entity, key, remove=True))
                continue
            problem = check_value(keys, key, value)
            if problem is not None:
                return problem, []
            if current.get(key) != value:
                out.append(ClientQuotaRecord(entity, key, float(value)))
        return None, out


# ---------------------------------------------------------------------- DescribeClientQuotas


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


class QuotaFilterError(ValueError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def describe_quotas(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], components: Sequence[FilterComponent], strict: bool
) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities a DescribeClientQuotas filter selects (Kafka's ClientQuotasImage.describe);
    raises QuotaFilterError (INVALID_REQUEST / UNSUPPORTED_VERSION) for a malformed filter."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise QuotaFilterError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {c.entity_type} cannot appear more than once in the filter.",
            )
        if c.entity_type not in ENTITY_TYPES:
            raise QuotaFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaFilterError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaFilterError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaFilterError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            typed.add(c.entity_type)
        else:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    named = set(exact) | typed
    if IP in named and (USER in named or CLIENT_ID in named):
        raise QuotaFilterError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with "
            "user or clientId filter component.",
        )
    out = []
    for entity, values in quotas.items():
        parts = dict(entity)
        if strict and len(parts) != len(named):
            continue
        if any(t not in parts or parts[t] != name for t, name in exact.items()):
            continue
        if any(t not in parts for t in typed):
            continue
        out.append((entity, dict(values)))
    return out


def _show(entity: QuotaEntity) -> str:
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"
