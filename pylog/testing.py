"""Real Kafka brokers for pytest: pylog's pytest plugin, loaded wherever pylog is installed (its
``pytest11`` entry point). A test asks for a fixture by name; nothing else to configure:

    def test_orders_are_counted(kafka_broker, kafka_topic):
        kafka_broker.produce(kafka_topic, [b"order-1", b"order-2"], keys=[b"ada", b"bob"])
        assert count_orders(kafka_broker.bootstrap_servers, kafka_topic) == 2

Fixtures:

- ``kafka_broker`` (session): one ``pylog broker`` process, started the first time a test asks for
  it (under a second) and stopped at the end of the session. ``.bootstrap_servers``, ``.data_dir``,
  ``.schema_registry_url`` and helpers: ``create_topic``, ``delete_topic``, ``produce``, ``read``.
- ``kafka_topic`` (each test): the name of a topic made for this test alone, on ``kafka_cluster``
  when the test uses it, else on ``kafka_broker``; ``@pytest.mark.kafka_topic(partitions=3,
  config={"cleanup.policy": "compact"})`` shapes it.
- ``kafka_cluster`` (session): a three-node cluster (`pylog.LocalCluster`, one process per node),
  started only for a session with a test that asks for it; the same helpers, topics replicated to
  every node by default, and ``.cluster`` to ``kill`` (-9), ``pause``, ``resume`` or ``restart`` a node.
- ``schema_registry_url`` (session): the Schema Registry ``kafka_broker`` serves (it needs the
  ``registry`` extra; the broker starts it when a test of the session asks for this fixture).
- ``kafka_broker_config`` (session): Kafka broker configs for both, ``{}`` unless a conftest.py
  overrides the fixture.

The brokers run in child processes that stop with the test session, however it ends (see
`pylog.local`). Loading this plugin imports nothing but pytest: a session that asks for none of
these fixtures is not slowed down.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pylog.clock import SYSTEM_CLOCK, Clock

CLOCK: Clock = SYSTEM_CLOCK  # the test helpers' clock: they wait for a cluster, they keep no node's time

if TYPE_CHECKING:
    import pyarrow as pa

    from pylog.local import LocalBroker
    from pylog.local_cluster import LocalCluster
    from pylog.sdk.writer import WriteResult

# a record's headers: a mapping or (key, value) pairs
Headers = Mapping[str, "bytes | str"] | Sequence[tuple[str, "bytes | str"]]

# CreateTopics answers a cluster whose brokers have not all registered yet with these; asked again
_RETRIABLE = {"INVALID_REPLICATION_FACTOR", "NOT_CONTROLLER", "REQUEST_TIMED_OUT", "BROKER_NOT_AVAILABLE",
              "LEADER_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "UNKNOWN_SERVER_ERROR"}


class KafkaServers:
    """Where a running broker or cluster is, and helpers that use it (topics, writes, reads)."""

    def __init__(self, bootstrap_servers: str, data_dir: Path, schema_registry_url: str | None,
                 replication_factor: int) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.data_dir = data_dir
        self.schema_registry_url = schema_registry_url
        self.replication_factor = replication_factor

    def create_topic(self, name: str | None = None, *, partitions: int = 1,
                     replication_factor: int | None = None, config: Mapping[str, object] | None = None,
                     timeout_s: float = 30.0) -> str:
        """Create a topic (a random name unless given) and wait until every partition has a leader;
        returns its name. A topic of that name that already exists is an error."""
        from pylog.protocol.api import ApiKey

        name = name or f"topic-{uuid.uuid4().hex[:12]}"
        body = {
            "topics": [{
                "name": name, "num_partitions": partitions,
                "replication_factor": replication_factor or self.replication_factor, "assignments": [],
                "configs": [{"name": str(k), "value": str(v)} for k, v in (config or {}).items()],
            }],
            "timeout_ms": int(timeout_s * 1000), "validate_only": False,
        }
        deadline = CLOCK.monotonic_s() + timeout_s
        while True:
            result = self._request(ApiKey.CREATE_TOPICS, 7, body).topics[0]
            error = _error_name(result.error_code)
            if error is None:
                break
            if error not in _RETRIABLE or CLOCK.monotonic_s() > deadline:
                raise RuntimeError(f"CreateTopics {name!r}: {error}"
                                   + (f" ({result.error_message})" if result.error_message else ""))
            time.sleep(0.1)
        self._wait_for_leaders(name, partitions, deadline)
        return name

    def delete_topic(self, name: str, *, timeout_s: float = 30.0) -> None:
        from pylog.protocol.api import ApiKey

        body = {"topics": [{"name": name, "topic_id": None}], "timeout_ms": int(timeout_s * 1000)}
        result = self._request(ApiKey.DELETE_TOPICS, 6, body).responses[0]
        error = _error_name(result.error_code)
        if error is not None:
            raise RuntimeError(f"DeleteTopics {name!r}: {error}")

    def produce(self, topic: str, values: Any, *, keys: Sequence[bytes | str | None] | None = None,
                headers: Sequence[Headers] | None = None, partition: int | None = None) -> WriteResult:
        """Write records with acks=all and return where they went (`pylog.write_topic`'s result:
        ``.offsets`` per partition). ``values``: one value or a list of them (bytes, str or None), with
        ``keys`` and ``headers`` (a mapping or (key, value) pairs per record) of the same length; or a
        pyarrow Table / pandas / Polars DataFrame with ``key``, ``value`` and ``headers`` columns. Keys
        pick partitions as the Java client's partitioner does, unless ``partition`` is given."""
        import pyarrow as pa

        import pylog

        data = values
        if values is None or isinstance(values, (bytes, str)):
            data = [values]
        if isinstance(data, (list, tuple)):
            columns = {"value": pa.array([_bytes(v) for v in data], pa.binary())}
            if keys is not None:
                columns["key"] = pa.array([_bytes(k) for k in _same_length(keys, data, "keys")], pa.binary())
            if headers is not None:
                from pylog.sdk.schema import HEADER_TYPE

                rows = [[{"key": k, "value": _bytes(v)} for k, v in _pairs(h)]
                        for h in _same_length(headers, data, "headers")]
                columns["headers"] = pa.array(rows, HEADER_TYPE)
            data = pa.table(columns)
        elif keys is not None or headers is not None:
            raise ValueError("keys= and headers= go with a list of values; a table brings its own columns")
        return pylog.write_topic(data, topic, bootstrap_servers=self.bootstrap_servers, partition=partition,
                                 progress=False)

    def read(self, topic: str, **options: Any) -> pa.Table:
        """Every record of `topic` as a pyarrow Table (`pylog.read_topic`: ``key, value, topic,
        partition, offset, timestamp, timestampType``; its options, e.g. ``decode="utf8"``,
        ``include_headers=True``, ``partitions=[0]``)."""
        import pylog

        options.setdefault("progress", False)
        return pylog.read_topic(topic, bootstrap_servers=self.bootstrap_servers, **options)

    def _request(self, api_key: int, version: int, body: Any) -> Any:
        from pylog.cluster_info import request

        return request(self.bootstrap_servers, api_key, version, body, timeout_s=30.0)

    def _wait_for_leaders(self, name: str, partitions: int, deadline: float) -> None:
        """Until every running node knows a leader for each partition (a client may ask any of them)."""
        from pylog.cluster_info import request
        from pylog.protocol.api import ApiKey

        body = {"topics": [{"name": name, "topic_id": None}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
        for address in self.bootstrap_servers.split(","):
            while True:
                try:
                    md = request(address, ApiKey.METADATA, 12, body, timeout_s=5.0).topics[0]
                except OSError:
                    break  # a node that is down (killed by a test, say) is asked nothing
                led = [p for p in md.partitions if p.leader_id >= 0 and not p.error_code]
                if not md.error_code and len(led) == partitions:
                    break
                if CLOCK.monotonic_s() > deadline:
                    raise TimeoutError(f"topic {name!r} has no leader for every partition at {address}")
                time.sleep(0.05)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bootstrap_servers={self.bootstrap_servers!r})"


class KafkaBroker(KafkaServers):
    """The ``kafka_broker`` fixture: a single-node pylog broker (``.broker``, a `pylog.LocalBroker`)."""

    def __init__(self, broker: LocalBroker) -> None:
        super().__init__(broker.bootstrap_servers, broker.data_dir, broker.schema_registry_url, 1)
        self.broker = broker

    def log_tail(self, lines: int = 40) -> str:
        return self.broker.log_tail(lines)


class KafkaCluster(KafkaServers):
    """The ``kafka_cluster`` fixture: ``.cluster`` is the `pylog.LocalCluster` (kill, pause, restart)."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(cluster.bootstrap_servers, cluster.home, cluster.schema_registry_url,
                         len(cluster.nodes))
        self.cluster = cluster


def _bytes(v: bytes | str | None) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _pairs(headers: Headers) -> Sequence[tuple[str, bytes | str]]:
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


def _same_length(items: Sequence[Any], values: Sequence[Any], what: str) -> Sequence[Any]:
    if len(items) != len(values):
        raise ValueError(f"{len(items)} {what} for {len(values)} values")
    return items


def _error_name(code: int) -> str | None:
    from pylog.protocol.errors import ErrorCode

    return None if code == 0 else ErrorCode.of(code).name


def _topic_name(test_name: str) -> str:
    """A legal, unique Kafka topic name that says which test made it."""
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', test_name).strip('-')[:100]}-{uuid.uuid4().hex[:8]}"


def _session_asks_for(request: pytest.FixtureRequest, fixture: str) -> bool:
    return any(fixture in getattr(item, "fixturenames", ()) for item in request.session.items)


# ---------------------------------------------------------------------------------------- the plugin


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_topic(partitions=1, replication_factor=None, config=None): "
        "how the kafka_topic fixture creates this test's topic")


@pytest.fixture(scope="session")
def kafka_broker_config() -> dict[str, str]:
    """Kafka broker configs for ``kafka_broker`` and ``kafka_cluster`` (override it in a conftest.py)."""
    return {}


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest, kafka_broker_config: Mapping[str, object],
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A pylog broker for the session (its data stays in pytest's temporary directory)."""
    from pylog.local import LocalBroker

    config = {str(k): str(v) for k, v in kafka_broker_config.items()}
    if not _session_asks_for(request, "schema_registry_url"):
        config.setdefault("schema.registry.listeners", "")  # nothing asks for one: a faster start
    home = tmp_path_factory.mktemp("kafka-broker")
    broker = LocalBroker(home / "data", config=config).start()
    try:
        yield KafkaBroker(broker)
    finally:
        broker.close()


@pytest.fixture(scope="session")
def kafka_cluster(kafka_broker_config: Mapping[str, object],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A three-node pylog cluster for the session."""
    from pylog.local_cluster import LocalCluster

    cluster = LocalCluster(3, data_dir=tmp_path_factory.mktemp("kafka-cluster"), config=kafka_broker_config,
                           keep_data=True)
    try:
        cluster.start()
        yield KafkaCluster(cluster)
    finally:
        cluster.close()


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest) -> str:
    """A new topic for this test, on ``kafka_cluster`` if the test uses it, else on ``kafka_broker``."""
    where = "kafka_cluster" if "kafka_cluster" in request.fixturenames else "kafka_broker"
    servers: KafkaServers = request.getfixturevalue(where)
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker is not None else {}
    return servers.create_topic(_topic_name(request.node.name), **options)


@pytest.fixture(scope="session")
def schema_registry_url(kafka_broker: KafkaBroker) -> str:
    """The Schema Registry (Confluent's REST API) that ``kafka_broker`` serves."""
    if kafka_broker.schema_registry_url is None:
        pytest.fail("schema_registry_url needs the schema registry's dependencies: "
                    "pip install 'pylog[registry]'")
    return kafka_broker.schema_registry_url
