"""Flight SQL on a real broker process, through ADBC's Flight SQL driver (the Go driver behind
``adbc_driver_flightsql.dbapi``, unchanged): topics listed as tables, SQL over two topics with
partition / offset / timestamp conditions, credentials and ACLs, and bad SQL answered without
harming the broker. Records are produced with confluent-kafka and checked against
``pylog.read_topic``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest
from adbc_driver_manager import AdbcStatusCode, Error
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from google.protobuf import any_pb2

import pylog
from pylog.flight import sql_messages

ORDERS, PAYMENTS, REFUNDS = "orders", "payments", "refunds"
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def create(bootstrap: str, topic: str, partitions: int, extra: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, partitions: int, extra: dict | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, **(extra or {})})
    for i in range(n):
        p.produce(topic, key=f"k{i % 7}".encode(), value=f"{topic}-{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


TYPED = "typed"
ITEM = {"type": "record", "name": "Item", "fields": [{"name": "sku", "type": "string"},
                                                     {"name": "amount", "type": "long"}]}


def produce_typed(b: pylog.LocalBroker) -> None:
    """Avro values framed for the broker's schema registry, and one value that is not."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    assert b.schema_registry_url is not None
    create(b.bootstrap_servers, TYPED, 1)
    serialize = AvroSerializer(SchemaRegistryClient({"url": b.schema_registry_url}), json.dumps(ITEM))
    ctx = SerializationContext(TYPED, MessageField.VALUE)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(6):
        p.produce(TYPED, value=serialize({"sku": f"s{i}", "amount": i * 10}, ctx))
    p.produce(TYPED, value=b"not framed")
    assert p.flush(30) == 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    """A broker with two log directories: a topic whose partitions are all in one is read from the
    segments, one spread over both through the broker's own Kafka client."""
    base = tmp_path_factory.mktemp("flight-sql")
    b = pylog.LocalBroker(base / "a", config={"pylog.flight.listeners": "grpc://127.0.0.1:0",
                                              "log.dirs": f"{base / 'a'},{base / 'b'}"})
    with b:
        create(b.bootstrap_servers, ORDERS, 2)
        create(b.bootstrap_servers, PAYMENTS, 3)
        create(b.bootstrap_servers, REFUNDS, 1)
        produce(b.bootstrap_servers, ORDERS, 120, 2)
        produce(b.bootstrap_servers, PAYMENTS, 90, 3)
        produce(b.bootstrap_servers, REFUNDS, 11, 1)
        produce_typed(b)
        dirs = {t: {p.parent.name for p in base.glob(f"*/{t}-*")} for t in (ORDERS, PAYMENTS, REFUNDS)}
        assert len(dirs[ORDERS]) == len(dirs[PAYMENTS]) == 2 and len(dirs[REFUNDS]) == 1, dirs
        yield b


@pytest.fixture
def conn(broker: pylog.LocalBroker) -> Iterator[flight_sql.Connection]:
    assert broker.flight_url is not None
    with flight_sql.connect(broker.flight_url, autocommit=True) as c:
        yield c


def test_topics_are_listed_as_tables(conn: flight_sql.Connection) -> None:
    objects = conn.adbc_get_objects().read_all().to_pylist()
    assert [c["catalog_name"] for c in objects] == ["pylog"]
    (schema,) = objects[0]["catalog_db_schemas"]
    assert schema["db_schema_name"] == "topics"
    tables = {t["table_name"]: t for t in schema["db_schema_tables"]}
    assert {ORDERS, PAYMENTS, REFUNDS} <= set(tables)
    assert [c["column_name"] for c in tables[ORDERS]["table_columns"]] == COLUMNS
    only = conn.adbc_get_objects(depth="tables", table_name_filter="pay%").read_all().to_pylist()
    assert [t["table_name"] for t in only[0]["catalog_db_schemas"][0]["db_schema_tables"]] == [PAYMENTS]
    table_schema = conn.adbc_get_table_schema(ORDERS)
    assert table_schema.names == COLUMNS
    assert table_schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert conn.adbc_get_info()["vendor_name"] == "pylog"


def test_sql_over_two_topics_with_partition_offset_and_time_bounds(
        broker: pylog.LocalBroker, conn: flight_sql.Connection) -> None:
    query = """
        select o.key, count(*) as n
        from orders o join payments p on o.key = p.key
        where o.partition = 1 and o."offset" >= 20 and p."offset" < 25
          and p.timestamp > now() - interval 1 hour
        group by o.key order by o.key"""
    with conn.cursor() as cur:
        cur.execute(query)
        got = cur.fetch_arrow_table()
        cur.execute("select partition, count(*) as n from pylog.topics.payments "
                    "where \"offset\" between 5 and 9 group by partition "
                    "union all select -1, count(*) from orders where timestamp > now() - interval 1 hour "
                    "union all select -2, count(*) from refunds where \"offset\" > 3 "
                    "order by 1")
        counts = cur.fetch_arrow_table().to_pylist()
    orders = pylog.read_topic(ORDERS, bootstrap_servers=broker.bootstrap_servers)
    payments = pylog.read_topic(PAYMENTS, bootstrap_servers=broker.bootstrap_servers)
    o = orders.filter(pc.and_(pc.equal(orders["partition"], 1), pc.greater_equal(orders["offset"], 20)))
    p = payments.filter(pc.less(payments["offset"], 25))
    per_key = {}
    for key in set(o["key"].to_pylist()):
        per_key[key] = o["key"].to_pylist().count(key) * p["key"].to_pylist().count(key)
    expected = sorted((k, n) for k, n in per_key.items() if n)
    assert [(r["key"], r["n"]) for r in got.to_pylist()] == expected and expected
    assert counts == [{"partition": -2, "n": 7}, {"partition": -1, "n": 120}] + \
        [{"partition": q, "n": 5} for q in range(3)]


def test_bad_sql_and_malformed_commands_are_refused_and_the_broker_keeps_serving(
        broker: pylog.LocalBroker, conn: flight_sql.Connection) -> None:
    with conn.cursor() as cur:
        for bad, message in [("selec 1", "syntax error"), ("select * from no_such_topic", "no_such_topic"),
                             ("select * from read_csv('/etc/passwd')", "disabled"),
                             ("   ", "empty"), ("create table t (a int)", "return rows")]:
            with pytest.raises(Error, match=message) as caught:
                cur.execute(bad)
                cur.fetch_arrow_table()
            assert caught.value.status_code == AdbcStatusCode.INVALID_ARGUMENT, (bad, caught.value)
        cur.execute("select count(*) as n from orders")
        assert cur.fetch_arrow_table().to_pylist() == [{"n": 120}]
        schema = cur.adbc_execute_schema("select key, count(*) as n from orders group by key")
        assert schema == pa.schema([("key", pa.binary()), ("n", pa.int64())])
    assert broker.flight_url is not None
    raw = flight.FlightClient(broker.flight_url)
    try:
        corrupt = any_pb2.Any(type_url=sql_messages.TYPE_URL_PREFIX + "CommandGetTables", value=b"\xff\xff")
        not_a_command = sql_messages.pack(sql_messages.new("TicketStatementQuery", statement_handle=b"x"))
        for command, message in [(corrupt.SerializeToString(), "malformed CommandGetTables"),
                                 (not_a_command, "not a Flight SQL command")]:
            with pytest.raises(pa.ArrowInvalid, match=message):
                raw.get_flight_info(flight.FlightDescriptor.for_command(command))
        unknown = any_pb2.Any(type_url=sql_messages.TYPE_URL_PREFIX + "CommandGetXdbcTypeInfo")
        with pytest.raises(pa.ArrowNotImplementedError, match="CommandGetXdbcTypeInfo"):
            raw.get_flight_info(flight.FlightDescriptor.for_command(unknown.SerializeToString()))
        with pytest.raises(pa.ArrowInvalid, match="unknown or expired statement"):
            ticket = sql_messages.pack(sql_messages.new("TicketStatementQuery", statement_handle=b"nope"))
            raw.do_get(flight.Ticket(ticket)).read_all()
        with pytest.raises(pa.ArrowNotImplementedError):
            raw.get_flight_info(flight.FlightDescriptor.for_command(
                sql_messages.pack(sql_messages.new("CommandStatementQuery", query="select 1",
                                                   transaction_id=b"t"))))
        with pytest.raises(pa.ArrowNotImplementedError, match="BeginTransaction"):
            list(raw.do_action(flight.Action("BeginTransaction", b"")))
        # a prepared statement runs through GetFlightInfo; its handle is no ticket, a ticket serves once
        request = sql_messages.new("ActionCreatePreparedStatementRequest",
                                   query="select count(*) as n from orders")
        (answer,) = raw.do_action(flight.Action("CreatePreparedStatement", sql_messages.pack(request)))
        handle = sql_messages.unpack(answer.body.to_pybytes())[1].prepared_statement_handle
        with pytest.raises(pa.ArrowInvalid, match="unknown or expired statement"):
            ticket = sql_messages.pack(sql_messages.new("TicketStatementQuery", statement_handle=handle))
            raw.do_get(flight.Ticket(ticket)).read_all()
        info = raw.get_flight_info(flight.FlightDescriptor.for_command(sql_messages.pack(
            sql_messages.new("CommandPreparedStatementQuery", prepared_statement_handle=handle))))
        assert raw.do_get(info.endpoints[0].ticket).read_all().to_pylist() == [{"n": 120}]
        with pytest.raises(pa.ArrowInvalid, match="unknown or expired statement"):
            raw.do_get(info.endpoints[0].ticket).read_all()
    finally:
        raw.close()
    with conn.cursor() as cur:  # still serving
        cur.execute("select max(\"offset\") as m from payments where partition = 2")
        assert cur.fetch_arrow_table().to_pylist() == [{"m": 29}]


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_root="root-secret" user_bob="bob-secret";')


def test_credentials_and_acls(tmp_path) -> None:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:root",
        "pylog.flight.listeners": "grpc://127.0.0.1:0",
    }
    with pylog.LocalBroker(tmp_path / "d", config=config) as b:
        printed = (b._tmp / "broker.stdout").read_text()
        sasl = re.search(r"pylog listener SASL_PLAINTEXT on (\S+)", printed)
        bootstrap = sasl.group(1) if sasl else b.bootstrap_servers
        root = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": "root", "sasl.password": "root-secret"}
        create(bootstrap, "secret", 1, root)
        create(bootstrap, "shared", 1, root)
        produce(bootstrap, "secret", 10, 1, root)
        produce(bootstrap, "shared", 4, 1, root)
        admin = AdminClient({"bootstrap.servers": bootstrap, **root})
        grant = AclBinding(ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL, "User:bob", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)
        admin.create_acls([grant])[grant].result(30)
        url = b.flight_url
        assert url is not None

        with flight_sql.connect(url, autocommit=True) as anonymous, anonymous.cursor() as cur:
            with pytest.raises(Error, match="authentication required") as caught:
                cur.execute("select count(*) from secret")
            assert caught.value.status_code == AdbcStatusCode.UNAUTHENTICATED

        with pytest.raises(Error, match="invalid credentials") as caught:
            flight_sql.connect(url, db_kwargs={"username": "bob", "password": "wrong"}, autocommit=True)
        assert caught.value.status_code == AdbcStatusCode.UNAUTHENTICATED

        bob_login = {"username": "bob", "password": "bob-secret"}
        with flight_sql.connect(url, db_kwargs=bob_login, autocommit=True) as bob, bob.cursor() as cur:
            with pytest.raises(Error, match="READ topic 'secret'") as caught:
                cur.execute("select count(*) from secret")
            assert caught.value.status_code == AdbcStatusCode.UNAUTHORIZED
            with pytest.raises(Error, match="READ topic 'secret'"):
                cur.execute("select count(*) from shared, pylog.topics.secret")
            tables = bob.adbc_get_objects(depth="tables").read_all().to_pylist()
            assert [t["table_name"] for t in tables[0]["catalog_db_schemas"][0]["db_schema_tables"]] == \
                ["shared"]
            cur.execute("select count(*) as n from shared")
            assert cur.fetch_arrow_table().to_pylist() == [{"n": 4}]

        root_login = {"username": "root", "password": "root-secret"}
        with flight_sql.connect(url, db_kwargs=root_login, autocommit=True) as admin_conn, \
                admin_conn.cursor() as cur:
            cur.execute("select s.n + h.n as n from (select count(*) n from secret) s, "
                        "(select count(*) n from shared) h")
            assert cur.fetch_arrow_table().to_pylist() == [{"n": 14}]
            tables = admin_conn.adbc_get_objects(depth="tables").read_all().to_pylist()
            names = [t["table_name"] for t in tables[0]["catalog_db_schemas"][0]["db_schema_tables"]]
            assert {"secret", "shared"} <= set(names)


def test_a_topic_with_a_registry_subject_has_typed_columns(conn: flight_sql.Connection) -> None:
    value = conn.adbc_get_table_schema(TYPED).field("value").type
    assert pa.types.is_struct(value) and [f.name for f in value] == ["sku", "amount"]
    assert conn.adbc_get_table_schema(ORDERS).field("value").type == pa.binary()
    with conn.cursor() as cur:
        cur.execute(f"select value.sku as sku, value.amount as amount from {TYPED} "
                    "where value.amount >= 20 order by amount")
        expected = [{"sku": f"s{i}", "amount": i * 10} for i in range(2, 6)]
        assert cur.fetch_arrow_table().to_pylist() == expected
        cur.execute(f"select count(*) as n from {TYPED} where value is null")  # the unframed record
        assert cur.fetch_arrow_table().to_pylist() == [{"n": 1}]


def test_bearer_tokens_last_while_used() -> None:
    from pylog.clock import ManualClock
    from pylog.flight.auth import TOKEN_IDLE_MS, BearerTokens, basic_padded
    from pylog.security.principal import user

    clock = ManualClock()
    tokens = BearerTokens(clock)
    token = tokens.issue(user("bob"))
    for _ in range(3):  # used within the idle time: kept, however long in all
        clock.advance(TOKEN_IDLE_MS - 1)
        assert tokens.principal(token) == (True, user("bob"))
    clock.advance(TOKEN_IDLE_MS + 1)
    assert tokens.principal(token) == (False, None)
    assert tokens.principal("never-issued") == (False, None)
    assert basic_padded("Basic Ym9iOmI") == "Basic Ym9iOmI="  # Go's unpadded base64 of bob:b
    assert basic_padded("Bearer abc") == "Bearer abc"


def test_flight_sql_messages_are_told_from_json_documents() -> None:
    from pylog.flight.tickets import is_flight_sql

    assert is_flight_sql(sql_messages.pack(sql_messages.new("CommandGetCatalogs")))
    long_name = any_pb2.Any(type_url=sql_messages.TYPE_URL_PREFIX + "X" * 200, value=b"")
    assert is_flight_sql(long_name.SerializeToString())  # a type URL over 127 bytes: a 2-byte length
    for raw in (b"", b'{"topic": "orders"}', b"\x0a\x03abc", any_pb2.Any(type_url="x/y").SerializeToString()):
        assert not is_flight_sql(raw)
