"""The registry's sans-IO state machine: plans applied as the store would apply them."""

from __future__ import annotations

import json

import pytest

from pylog.schema_registry import errors as e
from pylog.schema_registry import records
from pylog.schema_registry.core import Reference, RegistryState, Schema
from pylog.schema_registry.errors import RegistryError

V1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "b", "type": ["null", "string"], "default": None}]}
V3_REQUIRED = {**V1, "fields": [*V1["fields"], {"name": "c", "type": "string"}]}
BAD = {**V1, "fields": [{"name": "a", "type": "string"}]}


def avro(doc: dict, refs: tuple[Reference, ...] = ()) -> Schema:
    return Schema("AVRO", json.dumps(doc), refs)


def run(state: RegistryState, plan) -> object:
    """Apply a plan's records the way the store's tail does."""
    for key, value in plan.records:
        decoded = records.decode(key, value)
        assert decoded is not None or value is None
        k = json.loads(key)
        state.apply(k, json.loads(value) if value else None)
    return plan.result


def test_register_versions_and_ids() -> None:
    st = RegistryState()
    assert run(st, st.register("s", avro(V1))) == {"id": 1, "version": 1, "subject": "s"}
    assert run(st, st.register("s", avro(V1))) == {"id": 1, "version": 1, "subject": "s"}  # idempotent
    assert run(st, st.register("s", avro(V2))) == {"id": 2, "version": 2, "subject": "s"}
    assert run(st, st.register("other", avro(V1)))["id"] == 1  # the same schema keeps its global id
    assert [v.version for v in st.versions("s")] == [1, 2]
    assert st.version("s", "latest").id == 2
    assert st.lookup("s", avro(V1)).version == 1
    assert [(v.subject, v.version) for v in st.id_usages(1)] == [("other", 1), ("s", 1)]


def test_compatibility_levels() -> None:
    st = RegistryState()
    run(st, st.register("s", avro(V1)))
    with pytest.raises(RegistryError) as refused:
        st.register("s", avro(BAD))
    assert (refused.value.status, refused.value.error_code) == (409, e.INCOMPATIBLE_SCHEMA)
    with pytest.raises(RegistryError):
        st.register("s", avro(V3_REQUIRED))  # BACKWARD: a new field without a default
    run(st, st.set_compatibility("s", "FORWARD"))
    run(st, st.register("s", avro(V3_REQUIRED)))  # old readers ignore the new field
    run(st, st.set_compatibility("s", "NONE"))
    run(st, st.register("s", avro(BAD)))
    assert st.compatibility("s") == "NONE" and st.compatibility(None) == "BACKWARD"
    with pytest.raises(RegistryError) as bad_level:
        st.set_compatibility(None, "SOMETIMES")
    assert bad_level.value.error_code == e.INVALID_COMPATIBILITY_LEVEL


def test_transitive_checks_every_version() -> None:
    st = RegistryState()
    run(st, st.set_compatibility("s", "BACKWARD_TRANSITIVE"))
    run(st, st.register("s", avro(V1)))
    dropped = {**V1, "fields": [{"name": "b", "type": ["null", "string"], "default": None}]}
    run(st, st.register("s", avro(dropped)))  # reads V1 data: a dropped, b defaulted
    readd = {**V1, "fields": [{"name": "a", "type": "string"}]}
    with pytest.raises(RegistryError):
        st.register("s", avro(readd))


def test_soft_and_hard_delete() -> None:
    st = RegistryState()
    run(st, st.register("s", avro(V1)))
    run(st, st.register("s", avro(V2)))
    assert run(st, st.delete_version("s", 2, permanent=False)) == 2
    with pytest.raises(RegistryError) as again:
        st.delete_version("s", 2, permanent=False)
    assert again.value.error_code == e.VERSION_NOT_FOUND
    assert st.version("s", 2, deleted=True).deleted
    with pytest.raises(RegistryError) as not_soft:
        st.delete_subject("s", permanent=True)
    assert not_soft.value.error_code == e.SUBJECT_NOT_SOFT_DELETED
    assert run(st, st.delete_subject("s", permanent=False)) == [1]
    with pytest.raises(RegistryError) as soft:
        st.delete_subject("s", permanent=False)
    assert soft.value.error_code == e.SUBJECT_SOFT_DELETED
    assert st.subject_names() == [] and st.subject_names(deleted=True) == ["s"]
    assert run(st, st.delete_subject("s", permanent=True)) == [1, 2]
    assert st.subject_names(deleted=True) == []
    with pytest.raises(RegistryError) as gone:
        st.schema(1)
    assert gone.value.error_code == e.SCHEMA_NOT_FOUND
    assert run(st, st.register("s", avro(V1)))["version"] == 1  # numbering restarts after a hard delete


def test_references_resolve_and_block_deletes() -> None:
    st = RegistryState()
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "geo",
        "fields": [{"name": "city", "type": "string"}],
    }
    person = {"type": "record", "name": "Person", "fields": [{"name": "home", "type": "geo.Address"}]}
    run(st, st.register("address", avro(address)))
    ref = (Reference("geo.Address", "address", 1),)
    pid = run(st, st.register("person", avro(person, ref)))["id"]
    assert st.schema(pid).references == ref
    assert st.referenced_by("address", 1) == [pid]
    with pytest.raises(RegistryError) as used:
        st.delete_subject("address", permanent=False)
    assert used.value.error_code == e.REFERENCE_EXISTS
    with pytest.raises(RegistryError) as unresolved:
        st.register("p2", avro(person))
    assert unresolved.value.error_code == e.INVALID_SCHEMA


def test_modes() -> None:
    st = RegistryState()
    run(st, st.set_mode("s", "READONLY"))
    with pytest.raises(RegistryError) as ro:
        st.register("s", avro(V1))
    assert ro.value.error_code == e.OPERATION_NOT_PERMITTED
    run(st, st.delete_mode("s"))
    run(st, st.register("s", avro(V1)))
    with pytest.raises(RegistryError):
        st.set_mode(None, "IMPORT")  # subjects exist
    run(st, st.set_mode(None, "IMPORT", force=True))
    assert run(st, st.register("t", avro(V2), schema_id=100, version=7)) == {
        "id": 100,
        "version": 7,
        "subject": "t",
    }
    with pytest.raises(RegistryError) as bad:
        st.set_mode(None, "SOMETIMES")
    assert bad.value.error_code == e.INVALID_MODE


def test_unknown_records_and_instances_are_folded_safely() -> None:
    st = RegistryState()
    st.apply({"keytype": "NOOP", "magic": 0}, None)
    st.apply({"keytype": records.INSTANCE, "node": 3, "magic": 0}, {"url": "http://h:1"})
    assert st.instances == {3: "http://h:1"}
    assert records.decode(b"not json", b"{}") is None
