"""No answer pylog serves leaves a nullable array or struct null where Kafka's brokers send a value.

Kafka's own clients dereference such fields without a null check (the Java Admin client fails
with a NullPointerException on a null ``EligibleLeaderReplicas``), so a null is only right where a
Kafka broker sends one. The check reads the source of every module that builds responses: each
construction of a struct of a served response (an API a handler ``@serves``) and each attribute
assignment, and fails on a nullable array or struct field given ``None``, or left out while its
default is null, unless the field is one Kafka's brokers do send null (``SENT_NULL``, each with
where Kafka does it).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pylog.protocol.messages import DescribeTopicPartitionsResponse
from pylog.protocol.schema import (
    FieldSpec,
    MessageSpec,
    StructSpec,
    kafka_sends_null_by_default,
    load_all,
)

import pylog
import pylog.broker.handlers as handlers

# (message, struct, field) -> where Kafka's brokers send it null
SENT_NULL: dict[tuple[str, str, str], str] = {
    ("FetchResponse", "PartitionData", "AbortedTransactions"):
        "KafkaApis: abortedTransactions.orElse(null), null for a READ_UNCOMMITTED fetch",
    ("DescribeClientQuotasResponse", "DescribeClientQuotasResponse", "Entries"):
        "DescribeClientQuotasRequest.getErrorResponse: setEntries(null)",
    ("DescribeTopicPartitionsResponse", "DescribeTopicPartitionsResponse", "NextCursor"):
        "the last page has no cursor",
    ("ConsumerGroupHeartbeatResponse", "ConsumerGroupHeartbeatResponse", "Assignment"):
        "null when the member's assignment did not change (KIP-848)",
    ("ShareGroupHeartbeatResponse", "ShareGroupHeartbeatResponse", "Assignment"):
        "null when the member's assignment did not change (KIP-932)",
    **{
        ("StreamsGroupHeartbeatResponse", "StreamsGroupHeartbeatResponse", f): (
            "null when unchanged since the last heartbeat (KIP-1071)"
        )
        for f in ("ActiveTasks", "StandbyTasks", "WarmupTasks", "PartitionsByUserEndpoint")
    },
    ("StreamsGroupDescribeResponse", "DescribedGroup", "Topology"):
        "GroupMetadataManager.streamsGroupDescribe: an entry for a group not found has no topology",
    ("StreamsGroupDescribeResponse", "Member", "UserEndpoint"):
        "StreamsGroupMember.asStreamsGroupDescribeMember: null when the member defines no endpoint",
    ("PylogMetadataFetchResponse", "PylogMetadataFetchResponse", "Snapshot"):
        "pylog's own message: null when no snapshot rides along",
}

SOURCES = Path(pylog.__file__).parent


@dataclass(frozen=True)
class Watched:
    message: str
    struct: StructSpec
    field: FieldSpec

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.message, self.struct.name, self.field.json_name)


def served_responses() -> list[MessageSpec]:
    """The response of every API a handler serves (what ApiVersions advertises is built from)."""
    keys = set()
    for info in pkgutil.iter_modules(handlers.__path__):
        module = importlib.import_module(f"{handlers.__name__}.{info.name}")
        keys |= {fn.api_key for fn in vars(module).values() if callable(fn) and hasattr(fn, "versions")}
    specs = [s for s in load_all().values() if s.kind == "response" and s.api_key in keys]
    assert {s.api_key for s in specs} == keys
    return specs


def _structs_by_name(specs: list[MessageSpec]) -> dict[str, list[tuple[str, StructSpec]]]:
    out: dict[str, list[tuple[str, StructSpec]]] = {}
    for spec in specs:
        for st in spec.structs.values():
            out.setdefault(st.name, []).append((spec.name, st))
    return out


def _nullable_compound(f: FieldSpec) -> bool:
    return f.nullable is not None and f.type in ("array", "struct")


def _chain(node: ast.expr) -> list[str]:
    """``a.b.C`` -> ["a", "b", "C"]; [] for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


@dataclass
class Finding:
    where: str
    key: tuple[str, str, str]
    how: str

    def __str__(self) -> str:
        return f"{self.where}: {'.'.join(self.key)} {self.how}"


class Checker:
    def __init__(self, specs: list[MessageSpec]) -> None:
        self.by_name = _structs_by_name(specs)
        self.messages = {s.name for s in specs}
        self.calls = 0
        self.seen: set[str] = set()  # struct names constructed somewhere

    def candidates(self, chain: list[str], aliases: dict[str, list[str]]) -> list[tuple[str, StructSpec]]:
        if len(chain) == 1 and chain[0] in aliases:
            chain = aliases[chain[0]]
        if not chain or chain[-1] not in self.by_name:
            return []
        found = self.by_name[chain[-1]]
        message = next((c for c in chain if c in self.messages), None)
        return [(m, st) for m, st in found if message is None or m == message]

    def check_source(self, text: str, where: str) -> list[Finding]:
        tree = ast.parse(text)
        aliases = {  # Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
            t.id: _chain(n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and _chain(n.value)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        assigned = {  # fields set as attributes after construction (x.configs = [...])
            t.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Attribute)
        }
        out: list[Finding] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                out += self.check_call(node, aliases, assigned, where)
            elif isinstance(node, ast.Assign) and _is_none(node.value):
                for t in node.targets:
                    if isinstance(t, ast.Attribute):
                        out += self.check_attribute(t.attr, f"{where}:{node.lineno}")
        return out

    def check_call(
        self, node: ast.Call, aliases: dict[str, list[str]], assigned: set[str], where: str
    ) -> list[Finding]:
        cands = self.candidates(_chain(node.func), aliases)
        if not cands:
            return []
        given = {k.arg: k.value for k in node.keywords if k.arg is not None}
        splat = any(k.arg is None for k in node.keywords) or any(
            isinstance(a, ast.Starred) for a in node.args
        )
        out = []
        for message, st in cands:
            names = [f.name for f in st.fields]
            if not set(given) <= set(names):
                continue  # another struct of that name
            self.calls += 1
            self.seen.add(st.name)
            positional = set(names[: len(node.args)])
            for f in st.fields:
                if not _nullable_compound(f):
                    continue
                w = Watched(message, st, f)
                if w.key in SENT_NULL:
                    continue
                loc = f"{where}:{node.lineno}"
                if f.name in given and _is_none(given[f.name]):
                    out.append(Finding(loc, w.key, "given None"))
                elif (
                    f.name not in given and f.name not in positional and not splat
                    and f.name not in assigned and kafka_sends_null_by_default(f)
                ):
                    out.append(Finding(loc, w.key, "left out, and its default is null"))
        return out

    def check_attribute(self, attr: str, where: str) -> list[Finding]:
        hits = [
            Watched(m, st, f)
            for structs in self.by_name.values()
            for m, st in structs
            for f in st.fields
            if f.name == attr and _nullable_compound(f)
        ]
        if not hits or any(w.key in SENT_NULL for w in hits):
            return []
        return [Finding(where, hits[0].key, "set to None")]


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _sources() -> Iterator[Path]:
    yield from sorted(SOURCES.rglob("*.py"))


def test_no_served_response_leaves_a_field_null_that_kafka_fills() -> None:
    checker = Checker(served_responses())
    findings = []
    for path in _sources():
        findings += checker.check_source(path.read_text("utf-8"), str(path.relative_to(SOURCES.parent)))
    assert [str(f) for f in findings] == []
    # the check saw the answers it is about (a rename would otherwise make it pass vacuously)
    assert checker.calls > 200
    seen = {"DescribeTopicPartitionsResponsePartition", "PartitionData", "CreatableTopicResult"}
    assert seen <= checker.seen


def test_every_allowed_null_is_a_nullable_field_of_a_served_response() -> None:
    specs = {s.name: s for s in served_responses()}
    for message, struct, field in SENT_NULL:
        [f] = [f for f in specs[message].structs[struct].fields if f.json_name == field]
        assert _nullable_compound(f), (message, struct, field)


ELR_GIVEN_NONE = '''
from pylog.protocol.messages import DescribeTopicPartitionsResponse
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
p = Partition(partition_index=0, leader_id=1, eligible_leader_replicas=None, last_known_elr=[])
'''

CONFIGS_SET_NONE = '''
from pylog.protocol.messages import CreateTopicsResponse
entry = CreateTopicsResponse.CreatableTopicResult(name="t")
entry.configs = None
'''

CURSOR_LEFT_OUT = '''
from pylog.protocol.messages import DescribeTopicPartitionsResponse as R
r = R(throttle_time_ms=0, topics=[])
'''


def test_the_check_catches_each_way_of_leaving_a_field_null() -> None:
    checker = Checker(served_responses())
    found = [str(f) for f in checker.check_source(ELR_GIVEN_NONE, "elr")]
    assert found == ["elr:4: DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition."
                     "EligibleLeaderReplicas given None"]
    found = [str(f) for f in checker.check_source(CONFIGS_SET_NONE, "configs")]
    assert found == ["configs:4: CreateTopicsResponse.CreatableTopicResult.Configs set to None"]
    # Kafka sends no cursor on the last page: left out, it is null, and that is allowed
    assert checker.check_source(CURSOR_LEFT_OUT, "cursor") == []


def _nulls(value: object, spec: StructSpec, version: int, path: str) -> list[str]:
    """Where a decoded message holds null in a nullable array or struct field."""
    out = []
    for f in spec.fields:
        if not f.present(version):
            continue
        v = getattr(value, f.name)
        if v is None and _nullable_compound(f):
            out.append(f"{path}.{f.json_name}")
        elif f.struct is not None and v is not None:
            for item in v if f.type == "array" else [v]:
                out += _nulls(item, f.struct, version, f"{path}.{f.json_name}")
    return out


def _default_nulls(spec: StructSpec, version: int, path: str) -> list[str]:
    """Where Kafka's generated classes default a nullable array or struct to null, nested fields
    included (every array of structs holding one element, as `filled` builds it)."""
    out = []
    for f in spec.fields:
        if not f.present(version):
            continue
        if f.type == "array" and f.struct is not None:
            out += _default_nulls(f.struct, version, f"{path}.{f.json_name}")
        elif _nullable_compound(f) and kafka_sends_null_by_default(f):
            out.append(f"{path}.{f.json_name}")
        elif f.struct is not None:
            out += _default_nulls(f.struct, version, f"{path}.{f.json_name}")
    return out


def test_an_unset_field_goes_out_as_kafkas_generated_classes_default_it() -> None:
    """Every served response, built with nothing set and one element in each array, encoded at
    every version and decoded again: nullable arrays and structs come back null only where Kafka's
    own default is null (and never the ones Kafka's brokers always fill)."""
    from pylog.protocol.codec import compile_message

    def filled(st: StructSpec) -> object:
        obj = st.cls()
        for f in st.fields:
            if f.type == "array" and f.struct is not None:
                setattr(obj, f.name, [filled(f.struct)])
            elif f.type == "struct" and f.struct is not None and getattr(obj, f.name) is not None:
                setattr(obj, f.name, filled(f.struct))
        return obj

    checked = 0
    for spec in served_responses():
        assert spec.valid_versions is not None
        body = filled(spec.root)
        for version in range(spec.valid_versions[0], spec.valid_versions[1] + 1):
            decode, encode = compile_message(spec, version)
            raw = b"".join(bytes(p) for p in encode(body))
            back, end = decode(memoryview(raw), 0, len(raw))
            assert end == len(raw)
            expected = _default_nulls(spec.root, version, spec.name)
            assert _nulls(back, spec.root, version, spec.name) == expected, (spec.name, version)
            checked += 1
    assert checked > 250
    elr = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition()
    assert (elr.eligible_leader_replicas, elr.last_known_elr) == ([], [])  # JSON default null, sent empty
