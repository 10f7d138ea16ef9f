"""The broker's Schema Registry with confluent-kafka's own registry client and serializers, and typed
reads of what they (and kafka-python / kafkajs producing wire-format bytes) wrote."""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from compat_broker import BrokerProcess, free_port
from compat_clients import Rec, create_topic, produce
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

import pylog
from pylog.sdk import KafkaError as PylogKafkaError

V1 = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
INCOMPATIBLE = {**V1, "fields": [{"name": "id", "type": "string"}, *V1["fields"][1:]]}
T0 = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)


def _start_registry_broker(tmp: Path, name: str) -> BrokerProcess:
    port = free_port()
    b = BrokerProcess(
        tmp / f"{name}-data",
        tmp / f"{name}.log",
        config={"schema.registry.listeners": f"http://127.0.0.1:{port}"},
    )
    b.registry_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    b.start()
    return b


@pytest.fixture(scope="module")
def reg_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = _start_registry_broker(tmp_path_factory.mktemp("registry"), "registry")
    yield b
    b.close()


@pytest.fixture
def url(reg_broker: BrokerProcess) -> str:
    return reg_broker.registry_url  # type: ignore[attr-defined]


@pytest.fixture
def client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url})


def _produce_serialized(bootstrap: str, topic: str, serializer: AvroSerializer, rows: list[dict]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 200000,
        }
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    failures: list[str] = []
    for row in rows:
        producer.produce(
            topic,
            value=serializer(row, ctx),
            on_delivery=lambda err, _m: failures.append(str(err)) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not failures, failures[:3]


def _row(i: int, note: bool) -> dict:
    row = {
        "id": i,
        "customer": f"c{i % 97}",
        "amount": i * 0.5,
        "paid": i % 3 == 0,
        "at": T0 + datetime.timedelta(milliseconds=i),
    }
    if note:
        row["note"] = f"n{i}"
    return row


@pytest.mark.timeout(300)
def test_acceptance_two_avro_versions_100k_records(
    reg_broker: BrokerProcess, client: SchemaRegistryClient, url: str
) -> None:
    topic, subject = "payments", "payments-value"
    create_topic(reg_broker.bootstrap, topic)
    id1 = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    id2 = client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    assert id1 != id2
    assert client.get_versions(subject) == [1, 2]
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(INCOMPATIBLE), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert client.get_versions(subject) == [1, 2]

    half = 50_000
    _produce_serialized(
        reg_broker.bootstrap,
        topic,
        AvroSerializer(client, json.dumps(V1)),
        [_row(i, False) for i in range(half)],
    )
    _produce_serialized(
        reg_broker.bootstrap,
        topic,
        AvroSerializer(client, json.dumps(V2)),
        [_row(i, True) for i in range(half, 2 * half)],
    )

    via_kafka = pylog.read_topic(
        topic, bootstrap_servers=reg_broker.bootstrap, decode="registry", schema_registry_url=url
    )
    via_dir = pylog.read_topic(
        topic, data_dir=reg_broker.data_dir, decode="registry", schema_registry_url=url
    )
    via_log = pylog.read_topic(topic, bootstrap_servers=reg_broker.bootstrap, decode="registry")  # _schemas
    for table in (via_kafka, via_dir, via_log):
        assert table.num_rows == 2 * half
        value = table.schema.field("value").type
        assert [(f.name, f.type) for f in value] == [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("amount", pa.float64()),
            ("paid", pa.bool_()),
            ("at", pa.timestamp("ms", tz="UTC")),
            ("note", pa.string()),
        ]
        values = table.column("value").combine_chunks()
        ids = values.field("id").to_numpy()
        assert (ids == range(2 * half)).all()
        notes = values.field("note")
        assert notes.slice(0, half).null_count == half
        assert notes.slice(half).null_count == 0
        assert notes[half + 7].as_py() == f"n{half + 7}"
        assert values[12345].as_py() == {**_row(12345, False), "note": None}
        assert values.field("at")[3].as_py() == T0 + datetime.timedelta(milliseconds=3)


def test_evolve_delete_errors_and_config(client: SchemaRegistryClient, url: str) -> None:
    subject = "evolve-value"
    client.set_compatibility(subject, "FULL")
    assert client.get_compatibility(subject) == "FULL"
    v1 = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    v2 = client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))  # optional field: FULL-compatible
    assert client.get_schema(v1).schema_str == json.dumps(V1, separators=(",", ":"))
    assert client.lookup_schema(subject, Schema(json.dumps(V2), "AVRO")).version == 2
    assert client.get_latest_version(subject).schema_id == v2
    assert client.register_schema(subject, Schema(json.dumps(V2), "AVRO")) == v2  # idempotent
    assert client.test_compatibility(subject, Schema(json.dumps(V1), "AVRO")) is True
    assert client.test_compatibility(subject, Schema(json.dumps(INCOMPATIBLE), "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as e1:
        client.get_version(subject, 9)
    assert (e1.value.http_status_code, e1.value.error_code) == (404, 40402)
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    with pytest.raises(SchemaRegistryError) as e2:  # hard delete needs the subject soft-deleted first
        client.delete_subject(subject, permanent=True)
    assert e2.value.error_code == 40405
    assert client.delete_subject(subject) == [1]
    with pytest.raises(SchemaRegistryError) as e3:
        client.get_versions(subject)
    assert e3.value.error_code == 40401
    assert subject not in client.get_subjects()
    assert sorted(client.delete_subject(subject, permanent=True)) == [1, 2]
    with pytest.raises(SchemaRegistryError) as e4:
        client.lookup_schema(subject, Schema(json.dumps(V1), "AVRO"))
    assert e4.value.error_code == 40401
    with pytest.raises(SchemaRegistryError) as e5:
        client.set_compatibility(subject, "SIDEWAYS")
    assert e5.value.error_code == 42203
    with pytest.raises(SchemaRegistryError) as e6:
        client.register_schema("broken-value", Schema('{"type": "record", "name": "X"}', "AVRO"))
    assert (e6.value.http_status_code, e6.value.error_code) == (422, 42201)
    assert client.get_compatibility() == "BACKWARD"


def test_references_and_mode(client: SchemaRegistryClient) -> None:
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "geo",
        "fields": [{"name": "city", "type": "string"}],
    }
    person = {
        "type": "record",
        "name": "Person",
        "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "geo.Address"}],
    }
    client.register_schema("address", Schema(json.dumps(address), "AVRO"))
    ref = SchemaReference("geo.Address", "address", 1)
    pid = client.register_schema("person-value", Schema(json.dumps(person), "AVRO", [ref]))
    got = client.get_schema(pid)
    assert [(r.name, r.subject, r.version) for r in got.references] == [("geo.Address", "address", 1)]
    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_subject("address")
    assert referenced.value.error_code == 42206
    with pytest.raises(SchemaRegistryError) as unresolved:
        client.register_schema("orphan-value", Schema(json.dumps(person), "AVRO"))
    assert unresolved.value.error_code == 42201
    client.update_mode("address", "READONLY")
    assert client.get_mode("address") == "READONLY"
    with pytest.raises(SchemaRegistryError) as readonly:
        client.register_schema("address", Schema(json.dumps({**address, "doc": "x"}), "AVRO"))
    assert readonly.value.error_code == 42205
    client.delete_mode("address")
    assert client.get_global_mode() == "READWRITE"
    with pytest.raises(SchemaRegistryError) as no_subject_mode:
        client.get_mode("address")
    assert no_subject_mode.value.error_code == 40409


def _wire(schema_id: int, schema: dict, record: dict) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


@pytest.mark.parametrize("producer", ["kafka-python", "kafkajs"])
def test_other_clients_write_wire_format(
    reg_broker: BrokerProcess,
    client: SchemaRegistryClient,
    url: str,
    producer: str,
    request: pytest.FixtureRequest,
) -> None:
    if producer == "kafkajs":
        request.getfixturevalue("kafkajs")
    topic = f"wire-{producer}"
    create_topic(reg_broker.bootstrap, topic)
    sid = client.register_schema(f"{topic}-value", Schema(json.dumps(V2), "AVRO"))
    rows = [_row(i, True) for i in range(50)]
    recs = [Rec(value=_wire(sid, V2, {**r, "at": r["at"]}), key=str(i).encode()) for i, r in enumerate(rows)]
    produce(producer, reg_broker.bootstrap, topic, recs)
    table = pylog.read_topic(
        topic, bootstrap_servers=reg_broker.bootstrap, decode="registry", schema_registry_url=url
    )
    assert table.column("value").to_pylist() == rows
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    fresh = SchemaRegistryClient({"url": url})  # nothing cached: the deserializer asks the registry
    back = AvroDeserializer(fresh)(recs[4].value, SerializationContext(topic, MessageField.VALUE))
    assert back == rows[4]


def test_protobuf_and_json_schema_topics(
    reg_broker: BrokerProcess, client: SchemaRegistryClient, url: str
) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    msg = fd.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    msg.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="item", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    Order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    proto = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    topic = "orders-proto"
    p = Producer({"bootstrap.servers": reg_broker.bootstrap})
    for i in range(20):
        p.produce(
            topic,
            value=proto(
                Order(id=i, item=f"i{i}", tags=["a", str(i)]), SerializationContext(topic, MessageField.VALUE)
            ),
        )
    assert p.flush(30) == 0
    table = pylog.read_topic(
        topic, bootstrap_servers=reg_broker.bootstrap, decode="registry", schema_registry_url=url
    )
    assert table.column("value").to_pylist()[3] == {"id": 3, "item": "i3", "tags": ["a", "3"]}
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    fresh = SchemaRegistryClient({"url": url})  # nothing cached: the deserializers ask the registry
    wire = proto(Order(id=3, item="i3"), SerializationContext(topic, MessageField.VALUE))
    back = ProtobufDeserializer(Order, {"use.deprecated.format": False}, fresh)(
        wire, SerializationContext(topic, MessageField.VALUE))
    assert (back.id, back.item) == (3, "i3")

    js = {
        "type": "object",
        "title": "Click",
        "properties": {"page": {"type": "string"}, "ms": {"type": "integer"}},
    }
    ser = JSONSerializer(json.dumps(js), client, to_dict=lambda obj, _ctx: obj)
    topic = "clicks-json"
    for i in range(20):
        p.produce(
            topic, value=ser({"page": f"/p{i}", "ms": i}, SerializationContext(topic, MessageField.VALUE))
        )
    assert p.flush(30) == 0
    table = pylog.read_topic(
        topic, bootstrap_servers=reg_broker.bootstrap, decode="registry", schema_registry_url=url
    )
    assert table.column("value").to_pylist()[5] == {"page": "/p5", "ms": 5}
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def test_validation_refuses_records_without_a_known_schema(
    reg_broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    checked, open_topic = "validated", "not-validated"
    create_topic(reg_broker.bootstrap, checked, configs={"confluent.value.schema.validation": "true"})
    create_topic(reg_broker.bootstrap, open_topic)
    sid = client.register_schema(f"{checked}-value", Schema(json.dumps(V1), "AVRO"))
    good = _wire(sid, V1, _row(1, False))
    produce("confluent-kafka", reg_broker.bootstrap, checked, [Rec(value=good)])
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    kp = KafkaProducer(bootstrap_servers=reg_broker.bootstrap, retries=0)
    try:
        for bad, why in (
            (b"plain bytes", "not in the schema registry wire format"),
            (b"\x00\x00\x00\x7f\xff" + good[5:], "schema id 32767, which the schema registry does not know"),
        ):
            with pytest.raises(KafkaException) as refused:
                produce(
                    "confluent-kafka", reg_broker.bootstrap, checked, [Rec(value=bad)], config={"retries": 0}
                )
            assert refused.value.args[0].code() == KafkaError.INVALID_RECORD
            with pytest.raises(KafkaPythonError) as by_kafka_python:
                kp.send(checked, value=bad).get(timeout=20)
            assert type(by_kafka_python.value).__name__ == "InvalidRecordError"
            with pytest.raises(PylogKafkaError, match=why):  # the broker's error message
                pylog.write_topic(pa.table({"value": [bad]}), checked, bootstrap_servers=reg_broker.bootstrap)
            produce("confluent-kafka", reg_broker.bootstrap, open_topic, [Rec(value=bad)])
    finally:
        kp.close()
    assert pylog.read_topic(checked, bootstrap_servers=reg_broker.bootstrap).num_rows == 1
    assert pylog.read_topic(open_topic, bootstrap_servers=reg_broker.bootstrap).num_rows == 2


def test_corrupted_record_names_its_offset(
    reg_broker: BrokerProcess, client: SchemaRegistryClient, url: str
) -> None:
    topic = "corrupt"
    sid = client.register_schema(f"{topic}-value", Schema(json.dumps(V1), "AVRO"))
    good = _wire(sid, V1, _row(1, False))
    produce(
        "confluent-kafka",
        reg_broker.bootstrap,
        topic,
        [Rec(value=good), Rec(value=good[:9]), Rec(value=b"not wire"), Rec(value=good)],
    )
    with pytest.raises(ValueError, match=r"topic corrupt partition 0 offset 1"):
        pylog.read_topic(
            topic, bootstrap_servers=reg_broker.bootstrap, decode="registry", schema_registry_url=url
        )
    table = pylog.read_topic(
        topic,
        data_dir=reg_broker.data_dir,
        decode="registry",
        schema_registry_url=url,
        on_decode_error="null",
    )
    values = table.column("value").to_pylist()
    assert values[1] is None and values[2] is None and values[0] == values[3] == _row(1, False)


def test_registry_survives_a_restart(tmp_path: Path) -> None:
    b = _start_registry_broker(tmp_path, "restart")
    try:
        c = SchemaRegistryClient({"url": b.registry_url})  # type: ignore[attr-defined]
        sid = c.register_schema("kept-value", Schema(json.dumps(V1), "AVRO"))
        c.set_compatibility("kept-value", "NONE")
        b.stop()
        b.start()
        fresh = SchemaRegistryClient({"url": b.registry_url})  # type: ignore[attr-defined]
        assert fresh.get_subjects() == ["kept-value"]
        assert fresh.get_schema(sid).schema_str == json.dumps(V1, separators=(",", ":"))
        assert fresh.get_compatibility("kept-value") == "NONE"
        assert fresh.register_schema("other-value", Schema(json.dumps(V2), "AVRO")) == sid + 1
    finally:
        b.close()


def test_write_topic_registers_and_frames_avro(
    reg_broker: BrokerProcess, url: str, client: SchemaRegistryClient
) -> None:
    frame = pa.table(
        {
            "user": ["a", "b", None],
            "n": pa.array([1, 2, 3], pa.int64()),
            "at": pa.array([0, 1, 2], pa.timestamp("ms", tz="UTC")),
            "key": ["k1", "k2", "k3"],
        }
    )
    result = pylog.write_topic(
        frame,
        "framed",
        bootstrap_servers=reg_broker.bootstrap,
        key="key",
        value_schema="registry",
        schema_registry_url=url,
    )
    assert result.records == 3
    registered = json.loads(client.get_latest_version("framed-value").schema.schema_str)
    assert [f["name"] for f in registered["fields"]] == ["user", "n", "at"]
    table = pylog.read_topic("framed", bootstrap_servers=reg_broker.bootstrap, decode="registry")
    assert table.column("value").to_pylist() == frame.select(["user", "n", "at"]).to_pylist()
    assert table.column("key").to_pylist() == [b"k1", b"k2", b"k3"]
    # the same frame again: the schema is found, not registered twice
    pylog.write_topic(
        frame,
        "framed",
        bootstrap_servers=reg_broker.bootstrap,
        key="key",
        value_schema="registry",
        schema_registry_url=url,
    )
    assert client.get_versions("framed-value") == [1]
    with pytest.raises(ValueError, match="schema_registry_url"):
        pylog.write_topic(frame, "framed", bootstrap_servers=reg_broker.bootstrap, value_schema="registry")
