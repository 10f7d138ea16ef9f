"""The registry's state machine: subjects, versions, global ids, compatibility levels and modes.

Theory of operation. The ``_schemas`` log is the only truth. `RegistryState.apply` folds its
records, in log order, into an in-memory image; every broker's registry builds the same image by
tailing the same log. Queries read the image. A command (register, delete, set a level or a mode)
reads the image and returns a `Plan`: the records that would make the change and the answer to
give once they are in the log. Commands never mutate the image; the store appends the plan's
records through the one writer, and the image changes when the tail applies them. No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pylog.schema_registry import errors as e
from pylog.schema_registry import formats, records
from pylog.schema_registry.errors import RegistryError, SchemaParseError
from pylog.schema_registry.formats import AVRO, ParsedSchema

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
MAX_ID = 2**31 - 1


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as registered: type, text and references (the identity behind a global id)."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.text}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        return out


@dataclass
class Version:
    subject: str
    version: int
    id: int
    schema: Schema
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "version": self.version, "id": self.id, **self.schema.to_json()}


@dataclass
class Plan:
    records: list[records.Record] = field(default_factory=list)
    result: Any = None


def _refs(raw: Any) -> tuple[Reference, ...]:
    if raw in (None, []):
        return ()
    if not isinstance(raw, list):
        raise e.invalid_schema("references must be a list")
    out = []
    for r in raw:
        try:
            out.append(Reference(str(r["name"]), str(r["subject"]), int(r["version"])))
        except (KeyError, TypeError, ValueError):
            raise e.invalid_schema(f"a reference needs name, subject and version: {r!r}") from None
    return tuple(out)


def schema_from_request(body: Any) -> Schema:
    """The ``{"schema": ..., "schemaType": ..., "references": [...]}`` body of a register or lookup."""
    if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
        raise e.invalid_schema('the request body needs a "schema" string')
    schema_type = body.get("schemaType") or AVRO
    if schema_type not in formats.SCHEMA_TYPES:
        raise e.invalid_schema(
            f"unknown schemaType {schema_type!r}; known: {', '.join(formats.SCHEMA_TYPES)}"
        )
    return Schema(schema_type, body["schema"], _refs(body.get("references")))


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, Version]] = {}
        self.by_id: dict[int, Schema] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.instances: dict[int, str] = {}  # node id -> URL of that broker's registry
        self._parsed: dict[Schema, ParsedSchema] = {}

    # --- the log -----------------------------------------------------------------------------

    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        """Fold one ``_schemas`` record in; records of unknown kinds are ignored."""
        kind = key.get("keytype")
        subject = key.get("subject")
        if kind == records.SCHEMA:
            versions = self.subjects.setdefault(str(subject), {})
            number = int(key.get("version", 0))
            if value is None:
                versions.pop(number, None)
                if not versions:
                    del self.subjects[str(subject)]
                return
            schema = Schema(value.get("schemaType") or AVRO, value["schema"], _refs(value.get("references")))
            sid = int(value["id"])
            versions[number] = Version(str(subject), number, sid, schema, bool(value.get("deleted", False)))
            self.by_id.setdefault(sid, schema)
            self.max_id = max(self.max_id, sid)
        elif kind == records.CONFIG:
            if value is None:
                self.configs.pop(subject, None)
            elif value.get("compatibilityLevel") in COMPATIBILITY_LEVELS:
                self.configs[subject] = value["compatibilityLevel"]
        elif kind == records.INSTANCE:
            if value is None:
                self.instances.pop(int(key.get("node", -1)), None)
            elif isinstance(value.get("url"), str):
                self.instances[int(key.get("node", -1))] = value["url"]
        elif kind == records.MODE:
            if value is None:
                self.modes.pop(subject, None)
            elif value.get("mode") in MODES:
                self.modes[subject] = value["mode"]

    # --- parsing -----------------------------------------------------------------------------

    def resolved_references(
        self, refs: Iterable[Reference], seen: frozenset[str] = frozenset()
    ) -> list[tuple[str, str]]:
        """(name, text) of every schema `refs` reach, dependencies first."""
        out: list[tuple[str, str]] = []
        for r in refs:
            if r.name in seen:
                continue
            v = self.subjects.get(r.subject, {}).get(r.version)
            if v is None:
                raise e.invalid_schema(
                    f"reference {r.name!r}: subject {r.subject!r} has no version {r.version}"
                )
            out += [d for d in self.resolved_references(v.schema.references, seen | {r.name}) if d not in out]
            if (r.name, v.schema.text) not in out:
                out.append((r.name, v.schema.text))
        return out

    def parse(self, schema: Schema) -> ParsedSchema:
        got = self._parsed.get(schema)
        if got is None:
            try:
                got = formats.parse(
                    schema.schema_type, schema.text, self.resolved_references(schema.references)
                )
            except SchemaParseError as exc:
                raise e.invalid_schema(str(exc)) from None
            self._parsed[schema] = got
        return got

    def canonical(self, schema: Schema) -> Schema:
        return Schema(schema.schema_type, self.parse(schema).canonical, schema.references)

    # --- queries -----------------------------------------------------------------------------

    def subject_names(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            s
            for s, vs in self.subjects.items()
            if s.startswith(prefix) and (deleted or any(not v.deleted for v in vs.values()))
        )

    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        vs = [v for _, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted]
        if not vs:
            raise e.not_found(e.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return vs

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> Version:
        vs = self.versions(subject, deleted=deleted)
        if version in ("latest", -1, "-1"):
            return vs[-1]
        number = parse_version(version)
        for v in vs:
            if v.version == number:
                return v
        raise e.not_found(e.VERSION_NOT_FOUND, f"Version {number} not found.")

    def schema(self, schema_id: int) -> Schema:
        s = self.by_id.get(schema_id)
        if s is None or not any(v.id == schema_id for vs in self.subjects.values() for v in vs.values()):
            raise e.not_found(e.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return s

    def id_usages(self, schema_id: int, *, deleted: bool = False) -> list[Version]:
        self.schema(schema_id)
        return [
            v
            for s in sorted(self.subjects)
            for _, v in sorted(self.subjects[s].items())
            if v.id == schema_id and (deleted or not v.deleted)
        ]

    def lookup(self, subject: str, schema: Schema, *, deleted: bool = False) -> Version:
        if not any(deleted or not v.deleted for v in self.subjects.get(subject, {}).values()):
            raise e.not_found(e.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        wanted = self.canonical(schema)
        for v in reversed(self.versions(subject, deleted=deleted)):
            if self._same(v.schema, wanted, schema):
                return v
        raise e.not_found(e.SCHEMA_NOT_FOUND, "Schema not found")

    def _same(self, stored: Schema, canonical: Schema, given: Schema) -> bool:
        if stored.schema_type != canonical.schema_type or stored.references != canonical.references:
            return False
        return stored.text in (canonical.text, given.text) or self.canonical(stored).text == canonical.text

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        v = self.version(subject, version)
        return sorted(
            {
                o.id
                for vs in self.subjects.values()
                for o in vs.values()
                if not o.deleted
                and any(r.subject == subject and r.version == v.version for r in o.schema.references)
            }
        )

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, DEFAULT_COMPATIBILITY)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)

    def incompatibilities(
        self, subject: str, schema: Schema, against: Sequence[Version] | None = None
    ) -> list[str]:
        """Why `schema` may not join `subject` under its level (empty: it may)."""
        level = self.compatibility(subject)
        live = self.subjects.get(subject, {})
        existing = [v for _, v in sorted(live.items()) if not v.deleted]
        if against is None:
            against = existing if level.endswith("_TRANSITIVE") else existing[-1:]
        if level == "NONE" or not against:
            return []
        new = self.parse(schema)
        out = []
        for old in against:
            prev = self.parse(old.schema)
            if level.startswith(("BACKWARD", "FULL")):
                out += [f"{m} (reading version {old.version})" for m in formats.incompatibilities(new, prev)]
            if level.startswith(("FORWARD", "FULL")):
                out += [
                    f"{m} (version {old.version} reading the new schema)"
                    for m in formats.incompatibilities(prev, new)
                ]
        return out

    # --- commands ----------------------------------------------------------------------------

    def register(
        self, subject: str, schema: Schema, *, schema_id: int | None = None, version: int | None = None
    ) -> Plan:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise e.unprocessable(e.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        if schema_id is not None and schema_id >= 0 and mode != "IMPORT":
            raise e.unprocessable(e.OPERATION_NOT_PERMITTED,
                                  "Setting a schema id is only allowed in IMPORT mode")
        canonical = self.canonical(schema)
        live = self.subjects.get(subject, {})
        for v in sorted(live.values(), key=lambda v: -v.version):
            if not v.deleted and self._same(v.schema, canonical, schema):
                return Plan([], {"id": v.id, "version": v.version, "subject": subject})
        if mode != "IMPORT":
            problems = self.incompatibilities(subject, schema)
            if problems:
                raise RegistryError(
                    409,
                    e.INCOMPATIBLE_SCHEMA,
                    f"Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: ' + "; ".join(problems),
                )
        if schema_id is None or schema_id < 0:
            schema_id = next((i for i, s in self.by_id.items() if self._same(s, canonical, schema)), None)
            if schema_id is None:
                schema_id = self.max_id + 1
        elif schema_id in self.by_id and not self._same(self.by_id[schema_id], canonical, schema):
            raise e.unprocessable(
                e.INVALID_SCHEMA, f"Schema id {schema_id} is already used by another schema"
            )
        if schema_id > MAX_ID:
            raise RegistryError(500, e.STORE_ERROR, "schema ids are exhausted")
        number = version if version is not None and version > 0 else max(live, default=0) + 1
        value = {
            "subject": subject,
            "version": number,
            "id": schema_id,
            "schema": canonical.text,
            "deleted": False,
        }
        if schema.schema_type != AVRO:
            value["schemaType"] = schema.schema_type
        if schema.references:
            value["references"] = [r.to_json() for r in schema.references]
        rec = (records.schema_key(subject, number), records.encode_value(value))
        return Plan([rec], {"id": schema_id, "version": number, "subject": subject})

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise e.unprocessable(e.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")

    def _check_unreferenced(self, v: Version) -> None:
        users = [
            o
            for vs in self.subjects.values()
            for o in vs.values()
            if not o.deleted
            and any(r.subject == v.subject and r.version == v.version for r in o.schema.references)
        ]
        if users:
            raise e.unprocessable(
                e.REFERENCE_EXISTS,
                f"One or more references exist to the schema {{subject={v.subject}, "
                f"version={v.version}}} (used by {users[0].subject} version {users[0].version})",
            )

    def _rewrite(self, v: Version, deleted: bool) -> records.Record:
        value = {
            "subject": v.subject,
            "version": v.version,
            "id": v.id,
            "schema": v.schema.text,
            "deleted": deleted,
        }
        if v.schema.schema_type != AVRO:
            value["schemaType"] = v.schema.schema_type
        if v.schema.references:
            value["references"] = [r.to_json() for r in v.schema.references]
        return records.schema_key(v.subject, v.version), records.encode_value(value)

    def delete_subject(self, subject: str, *, permanent: bool) -> Plan:
        self._check_writable(subject)
        every = self.subjects.get(subject, {})
        if not every:
            raise e.not_found(e.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        live = [v for _, v in sorted(every.items()) if not v.deleted]
        for v in live:
            self._check_unreferenced(v)
        if permanent:
            if live:
                raise e.not_found(
                    e.SUBJECT_NOT_SOFT_DELETED,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            gone = sorted(every)
            recs: list[records.Record] = [(records.schema_key(subject, n), None) for n in gone]
            recs += [(records.config_key(subject), None)] if subject in self.configs else []
            recs += [(records.mode_key(subject), None)] if subject in self.modes else []
            return Plan(recs, gone)
        if not live:
            raise e.not_found(
                e.SUBJECT_SOFT_DELETED,
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        return Plan([self._rewrite(v, True) for v in live], [v.version for v in live])

    def delete_version(self, subject: str, version: str | int, *, permanent: bool) -> Plan:
        self._check_writable(subject)
        v = self.version(subject, version, deleted=True) if permanent else self.version(subject, version)
        if permanent and version in ("latest", -1, "-1"):
            v = self.version(subject, version, deleted=True)
        self._check_unreferenced(v)
        if permanent:
            if not v.deleted:
                raise e.not_found(
                    e.SCHEMA_VERSION_NOT_SOFT_DELETED,
                    f"Subject '{subject}' Version {v.version} was not deleted first before "
                    "being permanently deleted",
                )
            return Plan([(records.schema_key(subject, v.version), None)], v.version)
        if v.deleted:
            raise e.not_found(
                e.SCHEMA_VERSION_SOFT_DELETED,
                f"Subject '{subject}' Version {v.version} was soft deleted.Set permanent=true "
                "to delete permanently",
            )
        return Plan([self._rewrite(v, True)], v.version)

    def set_compatibility(self, subject: str | None, level: Any) -> Plan:
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise e.unprocessable(
                e.INVALID_COMPATIBILITY_LEVEL,
                f"Invalid compatibility level. Valid values are {', '.join(COMPATIBILITY_LEVELS)}",
            )
        level = level.upper()
        rec = (records.config_key(subject), records.encode_value({"compatibilityLevel": level}))
        return Plan([rec], {"compatibility": level})

    def delete_compatibility(self, subject: str | None) -> Plan:
        if subject is not None and subject not in self.configs:
            if subject not in self.subjects:
                raise e.not_found(e.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
            raise e.not_found(
                e.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        old = self.compatibility(subject)
        recs: list[records.Record] = [(records.config_key(subject), None)] if subject in self.configs else []
        return Plan(recs, {"compatibilityLevel": old})

    def set_mode(self, subject: str | None, mode: Any, *, force: bool = False) -> Plan:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise e.unprocessable(e.INVALID_MODE, f"Invalid mode. Valid values are {', '.join(MODES)}")
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            scope = self.subjects if subject is None else {subject: self.subjects.get(subject, {})}
            if any(vs for vs in scope.values()):
                raise e.unprocessable(
                    e.OPERATION_NOT_PERMITTED, "Cannot import since found existing subjects"
                )
        return Plan([(records.mode_key(subject), records.encode_value({"mode": mode}))], {"mode": mode})

    def delete_mode(self, subject: str) -> Plan:
        if subject not in self.modes:
            raise e.not_found(
                e.SUBJECT_LEVEL_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        old = self.modes[subject]
        return Plan([(records.mode_key(subject), None)], {"mode": old})


def parse_version(version: str | int) -> int:
    try:
        number = int(version)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise e.unprocessable(
            e.INVALID_VERSION,
            f"The specified version '{version}' is not a valid version id. Allowed "
            'values are between [1, 2^31-1] and the string "latest"',
        )
    return number
