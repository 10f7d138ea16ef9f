"""The config definitions: every broker and topic config pylog knows, with Kafka's names, types,
defaults and topic-to-broker synonyms (``pylog.config`` resolves values from them).

`BROKER_CONFIGS` and `TOPIC_CONFIGS` are the configs pylog defines. Every other
Apache Kafka config (`pylog.kafka_configs`) is accepted, stored and described too,
but not acted on (``ConfigDef.acted_on`` is false); a name in neither list is
refused, with the nearest known name as a suggestion.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from pylog import kafka_configs as kafka
from pylog.model import INT16_MAX, INT32_MAX, LONG_MAX
from pylog.quotas.replication import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    WINDOW_NUM,
    WINDOW_SIZE_SECONDS,
    throttled_replicas_error,
)
from pylog.replication.replica_selector import SELECTORS
from pylog.storage.config import DEFAULT_SEGMENT_FORMAT, SEGMENT_COMPRESSION, SEGMENT_FORMATS

log = logging.getLogger(__name__)

# Kafka's alter-log-dirs quota (QuotaConfig): the bytes/s every move between this broker's log dirs
# copies together, measured over its own windows
ALTER_LOG_DIRS_IO_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
ALTER_LOG_DIRS_WINDOW_NUM = "alter.log.dirs.replication.quota.window.num"
ALTER_LOG_DIRS_WINDOW_SIZE_SECONDS = "alter.log.dirs.replication.quota.window.size.seconds"


def _at_least(low: int) -> Callable[[str, str], str | None]:
    """A ``check`` refusing numbers below ``low`` (Kafka's ``Range.atLeast``)."""

    def check(name: str, value: str) -> str | None:
        return f"Value must be at least {low}" if int(value) < low else None

    return check


class ConfigType(IntEnum):
    """DescribeConfigs ``config_type`` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(ValueError):
    """An unknown config name or a value of the wrong type."""


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None
    doc: str = ""
    choices: tuple[str, ...] = ()
    read_only: bool = False
    acted_on: bool = True  # False: a Kafka config pylog stores and describes but ignores
    check: Callable[[str, str], str | None] | None = None  # (name, value) -> why it is refused

    def parse(self, value: str | None) -> object:
        """Typed value of a Kafka config string; raises ConfigError when it does not fit."""
        if value is None:
            return None
        t = self.type
        try:
            if t is ConfigType.BOOLEAN:
                low = value.strip().lower()
                if low not in ("true", "false"):
                    raise ValueError(value)
                return low == "true"
            number: int | float | None = None
            if t in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
                number = int(value.strip())
                bound = {ConfigType.INT: INT32_MAX, ConfigType.SHORT: INT16_MAX, ConfigType.LONG: LONG_MAX}[t]
                if not -bound - 1 <= number <= bound:
                    raise ValueError(value)
            if t is ConfigType.DOUBLE:
                number = float(value)
        except ValueError:
            raise ConfigError(f"Invalid value {value!r} for configuration {self.name}") from None
        if number is not None:
            self._check(value)
            return number
        parts = [v.strip() for v in value.split(",") if v.strip()]
        if self.choices and (not parts or any(p not in self.choices for p in parts)):
            raise ConfigError(
                f"Invalid value {value} for configuration {self.name}: String must be one of: "
                + ", ".join(self.choices)
            )
        self._check(value)
        return parts if t is ConfigType.LIST else value

    def _check(self, value: str) -> None:
        if self.check is not None and (why := self.check(self.name, value)) is not None:
            raise ConfigError(f"Invalid value {value} for configuration {self.name}: {why}")


def _d(name: str, type_: ConfigType, default: object, doc: str = "", **kw: object) -> ConfigDef:
    if isinstance(default, bool):
        default = "true" if default else "false"
    return ConfigDef(name, type_, None if default is None else str(default), doc, **kw)  # type: ignore[arg-type]


B, S, INT, L, D, LS = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_CLEANUP = ("delete", "compact")
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TS_TYPE = ("CreateTime", "LogAppendTime")


def segment_format_error(_name: str, value: str) -> str | None:
    """Why a `pylog.segment.format` value is refused (None when it is a known format)."""
    return None if value.strip() in {str(f) for f in SEGMENT_FORMATS} else "must be 1 or 2"


_CAPPED = "Capped at the live brokers when the internal topic is created."
_TLS_VERSIONS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
PW = ConfigType.PASSWORD

BROKER_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        _d("node.id", INT, 1, "The node id of this broker and controller.", read_only=True),
        _d("broker.id", INT, 1, "Alias of node.id.", read_only=True),
        _d("process.roles", LS, "broker,controller", read_only=True),
        _d("log.dirs", S, None, "The directory holding the partition logs.", read_only=True),
        _d("log.dir", S, "./pylog-data", read_only=True),
        _d("listeners", LS, "PLAINTEXT://127.0.0.1:9092", read_only=True),
        _d("advertised.listeners", LS, None, read_only=True),
        _d(
            "listener.security.protocol.map",
            LS,
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            read_only=True,
        ),
        _d("controller.listener.names", LS, None, "Listeners the controller quorum uses.", read_only=True),
        _d("inter.broker.listener.name", S, None, "Listener brokers replicate over.", read_only=True),
        _d(
            "controller.quorum.voters",
            LS,
            None,
            "id@host:port of every controller voter; unset: this node is a quorum of one.",
            read_only=True,
        ),
        _d(
            "controller.quorum.bootstrap.servers",
            LS,
            None,
            "host:port of controllers to find the quorum through; the voters then come from the "
            "metadata log (kraft.version 1).",
            read_only=True,
        ),
        _d("controller.quorum.election.timeout.ms", INT, 1000, read_only=True),
        _d("controller.quorum.fetch.timeout.ms", INT, 2000, read_only=True),
        _d("controller.quorum.request.timeout.ms", INT, 2000, read_only=True),
        _d("broker.session.timeout.ms", INT, 9000, read_only=True),
        _d("broker.rack", S, None, read_only=True),
        _d("broker.heartbeat.interval.ms", INT, 2000, read_only=True),
        _d("metadata.log.max.record.bytes.between.snapshots", L, 20971520),
        _d("metadata.log.max.snapshot.interval.ms", L, 3600000),
        _d("replica.lag.time.max.ms", L, 30000),
        _d("replica.high.watermark.checkpoint.interval.ms", L, 5000),
        _d("replica.fetch.wait.max.ms", INT, 500),
        _d("replica.fetch.min.bytes", INT, 1),
        _d("replica.fetch.backoff.ms", INT, 1000),
        _d("replica.fetch.response.max.bytes", INT, 10485760),
        _d("num.replica.fetchers", INT, 1),
        _d("auto.leader.rebalance.enable", B, True),
        _d("leader.imbalance.check.interval.seconds", L, 300),
        _d("leader.imbalance.per.broker.percentage", INT, 10),
        _d("num.partitions", INT, 1, "Default number of partitions for auto-created topics."),
        _d("auto.create.topics.enable", B, True, "Create a topic on metadata request for an unknown one."),
        _d("default.replication.factor", INT, 1),
        _d("delete.topic.enable", B, True),
        _d("message.max.bytes", INT, 1048588, "Largest record batch size allowed."),
        _d("log.retention.hours", INT, 168),
        _d("log.retention.minutes", INT, None),
        _d("log.retention.ms", L, None),
        _d("log.retention.bytes", L, -1),
        _d("log.retention.check.interval.ms", L, 300000),
        _d("log.local.retention.ms", L, -2, "Default local.retention.ms (-2: retention.ms)."),
        _d("log.local.retention.bytes", L, -2, "Default local.retention.bytes (-2: retention.bytes)."),
        _d("remote.log.storage.system.enable", B, False,
           "Turn on the remote tier (KIP-405): topics with remote.storage.enable copy sealed segments "
           "to the store named by remote.log.storage.uri.", read_only=True),
        _d("remote.log.storage.uri", S, None,
           "The remote tier's object store: file:///path or s3://bucket/prefix (credentials by the "
           "usual AWS names).", read_only=True),
        _d("remote.log.storage.s3.endpoint", S, None,
           "Endpoint URL of an S3-compatible store (else AWS_ENDPOINT_URL, else AWS).", read_only=True),
        _d("remote.log.storage.s3.region", S, None, "Region of the S3 store (else AWS_REGION).",
           read_only=True),
        _d("remote.log.storage.s3.request.timeout.ms", L, 30000,
           "How long one request to the S3 store may take before it is retried.", read_only=True),
        _d("remote.log.reader.grace.ms", L, 300000,
           "How long superseded manifests and deleted segments' objects stay in the store, so a "
           "reader that planned with an older manifest never meets a missing object.", read_only=True),
        _d("remote.log.manager.task.interval.ms", L, 30000,
           "How often each leader looks for segments to copy and remote segments to expire.",
           read_only=True),
        _d("remote.log.manager.copier.thread.pool.size", INT, 10,
           "Threads uploading to and deleting from the store (store I/O never runs on the event "
           "loop).", read_only=True),
        _d("remote.log.reader.threads", INT, 10,
           "Threads reading the store for fetches and offset lookups below the local log start.",
           read_only=True),
        _d("remote.fetch.max.wait.ms", INT, 500,
           "How much longer than its max wait a fetch waits for records read from the store.",
           read_only=True),
        _d("pylog.remote.log.storage.upload.wire", B, True,
           "Also copy sealed segments' .wire files to the remote tier, so remote fetches send slices of "
           "them instead of encoding from Arrow (about twice as fast for a consumer catching up from the "
           "store; about doubles the bytes stored).", read_only=True),
        _d("pylog.remote.log.read.cache.bytes", L, 268435456,
           "Bytes of remote segment data kept in the read-ahead cache shared by remote fetches.",
           read_only=True),
        _d("log.segment.bytes", INT, 1073741824),
        _d("log.roll.hours", INT, 168),
        _d("log.roll.ms", L, None),
        _d("log.roll.jitter.ms", L, None),
        _d("log.roll.jitter.hours", INT, 0),
        _d("log.segment.delete.delay.ms", L, 60000),
        _d("log.cleanup.policy", LS, "delete", choices=_CLEANUP),
        _d("log.cleaner.enable", B, True),
        _d("log.cleaner.backoff.ms", L, 15000),
        _d("log.cleaner.delete.retention.ms", L, 86400000),
        _d("log.cleaner.min.compaction.lag.ms", L, 0),
        _d("log.cleaner.max.compaction.lag.ms", L, LONG_MAX),
        _d("log.cleaner.min.cleanable.ratio", D, 0.5),
        _d("log.flush.interval.messages", L, LONG_MAX),
        _d("log.flush.interval.ms", L, None),
        _d("log.flush.scheduler.interval.ms", L, LONG_MAX),
        _d("log.flush.offset.checkpoint.interval.ms", INT, 60000),
        _d("log.index.size.max.bytes", INT, 10485760),
        _d("log.index.interval.bytes", INT, 4096),
        _d("log.preallocate", B, False),
        _d("log.message.timestamp.type", S, "CreateTime", choices=_TS_TYPE),
        _d("log.message.timestamp.before.max.ms", L, LONG_MAX),
        _d("log.message.timestamp.after.max.ms", L, 3600000),
        _d("compression.type", S, "producer", choices=_COMPRESSION),
        _d("min.insync.replicas", INT, 1),
        _d("unclean.leader.election.enable", B, False),
        _d(
            "group.initial.rebalance.delay.ms",
            INT,
            100,
            "Wait before the first generation of an empty group, extended while members keep joining "
            "(Kafka: 3000; 100 ms lets a lone notebook consumer start at once).",
        ),
        _d("group.min.session.timeout.ms", INT, 6000),
        _d("group.max.session.timeout.ms", INT, 1800000),
        _d("group.max.size", INT, INT32_MAX),
        _d(
            "offsets.topic.num.partitions",
            INT,
            10,
            "Partitions of __consumer_offsets, fixed when it is created (Kafka: 50, sized for large "
            "clusters; 10 still spreads coordinators over a small cluster and is cheap to create).",
        ),
        _d("group.consumer.session.timeout.ms", INT, 45000),
        _d("group.consumer.heartbeat.interval.ms", INT, 5000),
        _d("group.consumer.assignors", LS, "uniform,range", "Server-side assignors, default first."),
        _d("group.consumer.max.size", INT, INT32_MAX),
        _d(
            "group.consumer.migration.policy",
            S,
            "bidirectional",
            "Online conversion between classic and consumer groups: bidirectional, upgrade, downgrade "
            "or disabled.",
        ),
        _d("group.share.session.timeout.ms", INT, 45000),
        _d("group.share.heartbeat.interval.ms", INT, 5000),
        _d("group.share.max.size", INT, 200),
        _d("group.share.record.lock.duration.ms", INT, 30000, "How long an acquired record stays locked."),
        _d("group.share.delivery.count.limit", INT, 5, "Deliveries after which a record is archived."),
        _d("group.share.partition.max.record.locks", INT, 2000, "In-flight records per share partition."),
        _d("group.streams.session.timeout.ms", INT, 45000, read_only=True),
        _d("group.streams.heartbeat.interval.ms", INT, 5000, read_only=True),
        _d("group.streams.max.size", INT, INT32_MAX, read_only=True),
        _d(
            "group.streams.num.standby.replicas",
            INT,
            0,
            "Accepted as Kafka's; streams groups get active tasks only (no standby tasks).",
            read_only=True,
        ),
        _d(
            "group.streams.initial.rebalance.delay.ms",
            INT,
            3000,
            "How long a new streams group waits for more members before its first task assignment.",
            read_only=True,
        ),
        _d(
            "share.auto.offset.reset",
            S,
            "latest",
            "Where a share group starts on a partition it has no state for (Kafka's group config; "
            "this is the default of every share group).",
            choices=("earliest", "latest"),
        ),
        _d("share.coordinator.state.topic.num.partitions", INT, 10, "Partitions of __share_group_state."),
        _d("share.coordinator.state.topic.replication.factor", ConfigType.SHORT, 3, _CAPPED),
        _d("share.coordinator.state.topic.segment.bytes", INT, 104857600),
        _d("offsets.topic.replication.factor", ConfigType.SHORT, 3, _CAPPED),
        _d("offsets.topic.segment.bytes", INT, 104857600),
        _d("offsets.retention.minutes", INT, 10080),
        _d("offsets.retention.check.interval.ms", L, 600000),
        _d("offsets.commit.timeout.ms", INT, 5000),
        _d("offset.metadata.max.bytes", INT, 4096),
        _d(
            "transaction.state.log.num.partitions",
            INT,
            10,
            "Partitions of __transaction_state, fixed when it is created (Kafka: 50; 10 as for "
            "__consumer_offsets).",
        ),
        _d("transaction.state.log.replication.factor", ConfigType.SHORT, 3, _CAPPED),
        _d("transaction.state.log.min.isr", INT, 2, "Capped at the replication factor."),
        _d("transaction.state.log.segment.bytes", INT, 104857600),
        _d("transactional.id.expiration.ms", INT, 604800000),
        _d("transaction.max.timeout.ms", INT, 900000),
        _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000),
        _d("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000),
        _d("producer.id.expiration.ms", INT, 86400000),
        _d("max.incremental.fetch.session.cache.slots", INT, 1000),
        _d("fetch.max.bytes", INT, 57671680),
        _d("socket.request.max.bytes", INT, 104857600, "Largest request frame accepted."),
        _d("socket.send.buffer.bytes", INT, 102400),
        _d("socket.receive.buffer.bytes", INT, 102400),
        _d("connections.max.idle.ms", L, 600000, "Idle connections are closed after this."),
        _d("max.connections", INT, INT32_MAX, "Connections beyond this are refused."),
        _d("max.connections.per.ip", INT, INT32_MAX),
        _d("telemetry.max.bytes", INT, 1048576, "Largest metrics payload a client may push (KIP-714).",
           read_only=True),
        _d("quota.window.num", INT, 11, "Windows client quota rates are measured over (at least 1).",
           read_only=True),
        _d("quota.window.size.seconds", INT, 1, "Length of one client quota window (at least 1).",
           read_only=True),
        _d(LEADER_RATE, L, LONG_MAX,
           "Bytes/s a leader returns to throttled follower replicas' fetches (KIP-73); dynamic."),
        _d(FOLLOWER_RATE, L, LONG_MAX,
           "Bytes/s this broker's replica fetchers take for throttled replicas (KIP-73); dynamic."),
        _d(ALTER_LOG_DIRS_IO_RATE, L, LONG_MAX,
           "Bytes/s all moves between this broker's log dirs (AlterReplicaLogDirs) copy together; "
           "dynamic, 0 holds them.", check=_at_least(0)),
        _d(ALTER_LOG_DIRS_WINDOW_NUM, INT, 11, "Windows the log dir move rate is measured over.",
           read_only=True, check=_at_least(1)),
        _d(ALTER_LOG_DIRS_WINDOW_SIZE_SECONDS, INT, 1, "Length of one log dir move rate window.",
           read_only=True, check=_at_least(1)),
        _d(WINDOW_NUM, INT, 11, "Windows replication throttle rates are measured over (at least 1).",
           read_only=True),
        _d(WINDOW_SIZE_SECONDS, INT, 1, "Length of one replication throttle window (at least 1).",
           read_only=True),
        _d("replica.selector.class", S, None,
           "Chooses the replica a consumer with a rack reads from (KIP-392); unset: the leader.",
           choices=SELECTORS, read_only=True),
        _d("queued.max.requests", INT, 500, "Requests in flight per connection before reads pause."),
        _d(
            "queued.max.request.bytes",
            L,
            16 * 1024 * 1024,
            "Bytes of requests whose answers still wait (acks=all produce, long-polling fetch) per "
            "connection before reads pause; -1: no bound. A producer cannot run the log far ahead "
            "of its followers, nor hold a broker's memory with requests it keeps waiting.",
        ),
        _d("num.network.threads", INT, 3),
        _d("num.io.threads", INT, 8),
        _d("num.recovery.threads.per.data.dir", INT, 2),
        _d("replica.fetch.max.bytes", INT, 1048576),
        _d("request.timeout.ms", INT, 30000),
        _d("cluster.id", S, None, "Fixed cluster id for a new data dir (random otherwise).", read_only=True),
        _d(
            "schema.registry.listeners",
            S,
            None,
            "http://HOST:PORT where the broker serves Confluent's Schema Registry REST API (off when unset; "
            "port 0 picks a free one).",
            read_only=True,
        ),
        _d(
            "pylog.metrics.listeners",
            S,
            None,
            "http://HOST:PORT (or https://, with the first client listener's ssl.* settings), comma "
            "separated, where the node serves Prometheus metrics (/metrics) and its health "
            "(/v1/status/live, /v1/status/ready); off when unset, port 0 picks a free one.",
            read_only=True,
        ),
        _d(
            "pylog.flight.listeners",
            S,
            None,
            "grpc://HOST:PORT (or grpc+tls://, with the first TLS client listener's ssl.keystore.*), comma "
            "separated, where the broker serves its topics over Arrow Flight "
            "(GetFlightInfo, DoGet of the partitions it leads, DoPut); off when unset, port 0 picks a "
            "free one.",
            read_only=True,
        ),
        _d("pylog.audit.topic", S, "",
           "Topic the audit trail (authentications, refused authentications, ACL denials) is also "
           "written to, as JSON values keyed by principal; empty: only the pylog.audit logger.",
           read_only=True),
        _d("pylog.audit.rate.per.sec", D, 10.0,
           "Audit events kept per second for each kind of event and client address (0: all); the "
           "others are counted in a periodic summary event.", read_only=True),
        _d("pylog.audit.summary.interval.ms", L, 60000,
           "How often the count of audit events over the rate is written as a summary event.",
           read_only=True),
        # --- security (listener-scoped: listener.name.<listener>.<name> overrides <name>) ---
        _d("ssl.keystore.type", S, "JKS", "Only PEM is read.", read_only=True),
        _d("ssl.keystore.location", S, None, "PEM file with the private key and its certificate chain.",
           read_only=True),
        _d("ssl.keystore.password", PW, None, read_only=True),
        _d("ssl.key.password", PW, None, "Password of an encrypted private key.", read_only=True),
        _d("ssl.keystore.key", PW, None, "The private key as PEM text (instead of a file).", read_only=True),
        _d("ssl.keystore.certificate.chain", PW, None, "The certificate chain as PEM text.", read_only=True),
        _d("ssl.truststore.type", S, "JKS", "Only PEM is read.", read_only=True),
        _d("ssl.truststore.location", S, None, "PEM file of trusted CA certificates.", read_only=True),
        _d("ssl.truststore.password", PW, None, read_only=True),
        _d("ssl.truststore.certificates", PW, None, "Trusted CA certificates as PEM text.", read_only=True),
        _d("ssl.client.auth", S, "none", choices=("required", "requested", "none"), read_only=True),
        _d("ssl.enabled.protocols", LS, "TLSv1.2,TLSv1.3", choices=_TLS_VERSIONS, read_only=True),
        _d("ssl.protocol", S, "TLSv1.3", read_only=True),
        _d("ssl.endpoint.identification.algorithm", S, "https",
           "https: check the server's host name when this node connects to another.", read_only=True),
        _d("ssl.principal.mapping.rules", S, "DEFAULT", read_only=True),
        _d("sasl.enabled.mechanisms", LS, "GSSAPI",
           "Served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.", read_only=True),
        _d("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", read_only=True),
        _d("sasl.mechanism.controller.protocol", S, "GSSAPI", read_only=True),
        _d("sasl.jaas.config", PW, None, "Only as listener.name.<listener>.<mechanism>.sasl.jaas.config.",
           read_only=True),
        _d("sasl.server.max.receive.size", INT, 524288, "Largest frame accepted before authentication.",
           read_only=True),
        _d("connections.max.reauth.ms", L, 0, "Session lifetime of SASL connections (KIP-368); 0: none.",
           read_only=True),
        _d("connection.failed.authentication.delay.ms", INT, 100, read_only=True),
        _d("sasl.server.callback.handler.class", ConfigType.CLASS, None,
           "OAUTHBEARER: org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler "
           "(signed tokens, JWKS) or OAuthBearerUnsecuredValidatorCallbackHandler (unsigned, for tests).",
           read_only=True),
        _d("sasl.oauthbearer.jwks.endpoint.url", S, None, "Where the OAUTHBEARER validator fetches its keys.",
           read_only=True),
        _d("sasl.oauthbearer.jwks.endpoint.refresh.ms", L, 3600000, read_only=True),
        _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", L, 100, read_only=True),
        _d("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", L, 10000, read_only=True),
        _d("sasl.oauthbearer.expected.audience", LS, None, read_only=True),
        _d("sasl.oauthbearer.expected.issuer", S, None, read_only=True),
        _d("sasl.oauthbearer.sub.claim.name", S, "sub", "The token claim naming the principal.",
           read_only=True),
        _d("sasl.oauthbearer.scope.claim.name", S, "scope", read_only=True),
        _d("sasl.oauthbearer.clock.skew.seconds", INT, 30, read_only=True),
        _d("sasl.oauthbearer.token.endpoint.url", S, None,
           "Where this node takes its OAUTHBEARER tokens for other nodes (client_credentials).",
           read_only=True),
        _d("sasl.oauthbearer.client.credentials.client.id", S, None, read_only=True),
        _d("sasl.oauthbearer.client.credentials.client.secret", PW, None, read_only=True),
        _d("sasl.oauthbearer.scope", S, None, read_only=True),
        _d("max.connections.per.ip.overrides", S, "", "host:count,... exceptions to max.connections.per.ip."),
        _d("authorizer.class.name", S, "",
           "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns on ACLs.", read_only=True),
        _d("super.users", S, None, "Principals allowed everything, separated by ';' (User:admin).",
           read_only=True),
        _d("allow.everyone.if.no.acl.found", B, False, read_only=True),
        _d(
            "pylog.iceberg.catalog.type",
            S,
            "sql",
            "Catalog of the Iceberg tables topics are materialised into: sql (pyiceberg's SqlCatalog, an "
            "SQLite file in the data directory unless pylog.iceberg.catalog.uri names another database) or "
            "rest (an Iceberg REST catalog at pylog.iceberg.catalog.uri).",
            choices=("sql", "rest"),
            read_only=True,
        ),
        _d("pylog.iceberg.catalog.uri", S, None,
           "The catalog's URI: a SQLAlchemy URL for sql (default sqlite:///<data dir>/iceberg/catalog.db), "
           "the REST catalog's URL for rest. Brokers that materialise topics share one catalog.",
           read_only=True),
        _d("pylog.iceberg.catalog.name", S, "pylog", "The catalog's name (pyiceberg's configuration key).",
           read_only=True),
        _d("pylog.iceberg.warehouse", S, None,
           "Where table files go, as a path or URI (default <data dir>/iceberg/warehouse).", read_only=True),
        _d(
            "pylog.memory.release.interval.ms",
            L,
            10000,
            "How often freed memory (Arrow's pool, malloc's heap) is returned to the kernel; 0 never.",
        ),
        _d(
            "pylog.segment.compression",
            S,
            "producer",
            "How segment bodies (Arrow IPC buffers) are compressed: producer (batches the producer "
            "compressed are stored with lz4, or zstd for gzip and zstd), none, lz4 or zstd.",
            choices=SEGMENT_COMPRESSION,
        ),
        _d(
            "pylog.segment.wire",
            B,
            True,
            "Keep each sealed segment's Kafka batches as wire bytes in a .wire file beside it, so "
            "fetches of history send them without encoding from Arrow (disk: about the bytes "
            "producers sent).",
        ),
        _d(
            "pylog.segment.format",
            INT,
            DEFAULT_SEGMENT_FORMAT,
            "The format new segments are written in (storage/FORMAT.md): 1, Arrow columns (and a "
            ".wire copy of the Kafka batches); 2, one copy, Arrow views into the producers' records "
            "sections. Segments of either format are served and read.",
            check=segment_format_error,
        ),
        _d(
            "pylog.wire.cache.bytes",
            L,
            64 * 1024 * 1024,
            "Wire bytes of recent batches one partition may keep (within pylog.wire.cache.total.bytes).",
        ),
        _d(
            "pylog.wire.cache.total.bytes",
            L,
            64 * 1024 * 1024,
            "Wire bytes of recent batches kept across partitions; when over, the oldest batch of any "
            "partition goes first.",
        ),
    ]
}

# The JAAS configuration is set per listener and SASL mechanism:
# listener.name.<listener>.<mechanism>.sasl.jaas.config (never for the whole broker).
MECHANISM_SCOPED = frozenset({"sasl.jaas.config"})


# Topic config -> broker synonyms, most specific first (Kafka's LogConfig.TopicConfigSynonyms).
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "compression.type": ("compression.type",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "min.insync.replicas": ("min.insync.replicas",),
    "preallocate": ("log.preallocate",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.bytes": ("log.segment.bytes",),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "pylog.segment.compression": ("pylog.segment.compression",),
    "pylog.segment.wire": ("pylog.segment.wire",),
    "pylog.segment.format": ("pylog.segment.format",),
}

TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in [
        _d("cleanup.policy", LS, "delete", choices=_CLEANUP),
        _d("compression.type", S, "producer", choices=_COMPRESSION),
        _d("delete.retention.ms", L, 86400000),
        _d("file.delete.delay.ms", L, 60000),
        _d("flush.messages", L, LONG_MAX),
        _d("flush.ms", L, LONG_MAX),
        _d("index.interval.bytes", INT, 4096),
        _d("max.compaction.lag.ms", L, LONG_MAX),
        _d("max.message.bytes", INT, 1048588),
        _d("message.timestamp.type", S, "CreateTime", choices=_TS_TYPE),
        _d("message.timestamp.before.max.ms", L, LONG_MAX),
        _d("message.timestamp.after.max.ms", L, 3600000),
        _d("min.cleanable.dirty.ratio", D, 0.5),
        _d("min.compaction.lag.ms", L, 0),
        _d("min.insync.replicas", INT, 1),
        _d("preallocate", B, False),
        _d("retention.bytes", L, -1),
        _d("retention.ms", L, 604800000),
        _d("local.retention.bytes", L, -2,
           "Bytes of the partition kept on local disk once copied to the remote tier; -2: retention.bytes."),
        _d("local.retention.ms", L, -2,
           "How long copied segments stay on local disk; -2: retention.ms."),
        _d("remote.storage.enable", B, False,
           "Copy sealed segments to the remote tier (needs remote.log.storage.system.enable)."),
        _d("segment.bytes", INT, 1073741824),
        _d("segment.index.bytes", INT, 10485760),
        _d("segment.jitter.ms", L, 0),
        _d("segment.ms", L, 604800000),
        _d("unclean.leader.election.enable", B, False),
        _d(LEADER_REPLICAS, LS, "", "partition:broker pairs (or *) throttled as leaders (KIP-73).",
           check=throttled_replicas_error),
        _d(FOLLOWER_REPLICAS, LS, "", "partition:broker pairs (or *) throttled as followers (KIP-73).",
           check=throttled_replicas_error),
        _d("pylog.segment.compression", S, "producer", choices=SEGMENT_COMPRESSION),
        _d("pylog.segment.wire", B, True,
           "Keep sealed segments' Kafka batches as wire bytes (.wire) for fetches of history."),
        _d("pylog.segment.format", INT, DEFAULT_SEGMENT_FORMAT,
           "The format new segments are written in: 1 (Arrow columns) or 2 (one copy).",
           check=segment_format_error),
        _d("pylog.iceberg.enable", B, False,
           "Keep an Apache Iceberg table of this topic up to date (the leader of partition 0 writes it)."),
        _d("pylog.iceberg.table", S, None,
           "The Iceberg table (namespace.name); default pylog.<topic> with dots as underscores."),
        _d("pylog.iceberg.commit.interval.ms", L, 60000,
           "Target freshness: records reach the table within about this long."),
        _d("pylog.iceberg.mode", S, "append", "append: a row per record; upsert: the latest record per key.",
           choices=("append", "upsert")),
        _d("pylog.iceberg.layout", S, "auto",
           "Columns: kafka (key, value, topic, partition, offset, timestamp, headers), registry (the value's "
           "Schema Registry fields plus kafka_* columns) or auto (registry when <topic>-value has a schema).",
           choices=("auto", "kafka", "registry")),
        _d("pylog.iceberg.partition.by", S, "day", "Partitioning of the table by the record timestamp.",
           choices=("hour", "day", "month", "year", "none")),
        _d("confluent.key.schema.validation", B, False,
           "Refuse records whose key is not in the schema registry wire format with a known schema id."),
        _d("confluent.value.schema.validation", B, False,
           "Refuse records whose value is not in the schema registry wire format with a known schema id."),
    ]
}

_KAFKA_TYPES = {
    kafka.BOOLEAN: ConfigType.BOOLEAN,
    kafka.STRING: ConfigType.STRING,
    kafka.INT: ConfigType.INT,
    kafka.SHORT: ConfigType.SHORT,
    kafka.LONG: ConfigType.LONG,
    kafka.DOUBLE: ConfigType.DOUBLE,
    kafka.LIST: ConfigType.LIST,
    kafka.CLASS: ConfigType.CLASS,
    kafka.PASSWORD: ConfigType.PASSWORD,
}
_NOT_ACTED_ON = "Apache Kafka config; pylog stores and describes it but does not act on it."


def _kafka_only(name: str, type_: str, default: str | None, read_only: bool) -> ConfigDef:
    choices = kafka.VALID_VALUES.get(name, ())
    return ConfigDef(name, _KAFKA_TYPES[type_], default, _NOT_ACTED_ON, choices, read_only, acted_on=False)


# Every Apache Kafka broker / topic config: pylog's definition where it has one, Kafka's otherwise.
ALL_BROKER_CONFIGS: dict[str, ConfigDef] = {
    **{
        name: _kafka_only(name, t, default, mode == kafka.READ_ONLY)
        for name, (t, default, mode) in kafka.BROKER_CONFIGS.items()
    },
    **BROKER_CONFIGS,
}
ALL_TOPIC_CONFIGS: dict[str, ConfigDef] = {
    **{name: _kafka_only(name, t, default, False) for name, (t, default, _) in kafka.TOPIC_CONFIGS.items()},
    **TOPIC_CONFIGS,
}
for _name, (_t, _default, _server_default) in kafka.TOPIC_CONFIGS.items():
    if _server_default is not None:
        TOPIC_SYNONYMS.setdefault(_name, (_server_default,))

_LISTENER_PREFIX = "listener.name."


def broker_config_def(name: str) -> ConfigDef | None:
    """pylog's or Kafka's definition of a broker config. Kafka's listener-prefixed form
    (``listener.name.<listener>[.<sasl mechanism>].<config>``) has the definition of its config."""
    d = ALL_BROKER_CONFIGS.get(name)
    if d is None and name.startswith(_LISTENER_PREFIX):
        parts = name[len(_LISTENER_PREFIX) :].split(".")
        for i in (1, 2):
            base = ALL_BROKER_CONFIGS.get(".".join(parts[i:]))
            if base is not None and len(parts) > i:
                return ConfigDef(name, base.type, None, base.doc, base.choices, base.read_only, base.acted_on)
    return d


def topic_config_def(name: str) -> ConfigDef | None:
    return ALL_TOPIC_CONFIGS.get(name)


def unknown_config_message(kind: str, name: str) -> str:
    """Kafka's wording for a name in neither list, plus the nearest known name."""
    known = ALL_TOPIC_CONFIGS if kind == "topic" else ALL_BROKER_CONFIGS
    message = f"Unknown {kind} config name: {name}"
    return message + suggestion(name, known)


def suggestion(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of `known`, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


_noted: set[str] = set()


def note_not_acted_on(names: Iterable[str]) -> list[str]:
    """Log, once per process and name, that a stored Kafka config has no effect in pylog; returns
    the names logged now."""
    fresh = []
    for name in names:
        d = broker_config_def(name) or topic_config_def(name)
        if d is not None and not d.acted_on and name not in _noted:
            _noted.add(name)
            fresh.append(name)
            log.warning("%s is an Apache Kafka config that pylog stores but does not act on", name)
    return fresh


def check_static_broker_configs(
    settings: Mapping[str, str], *, strict: bool = True
) -> tuple[dict[str, str], list[str]]:
    """Broker settings given at start (``--config``, a properties file): the ones to apply and
    warnings about the rest.

    Raises ConfigError for a name that is neither a pylog nor an Apache Kafka config (a typo stops
    the start, with the nearest name as a suggestion; not `strict`, it is left out with a warning)
    and for a value that does not fit its config. A topic config given as a broker setting is left
    out with a warning naming its broker default.
    """
    accepted: dict[str, str] = {}
    warnings: list[str] = []
    for name, value in settings.items():
        d = broker_config_def(name)
        if d is None:
            if name in ALL_TOPIC_CONFIGS:
                brokers = TOPIC_SYNONYMS.get(name, ())
                hint = f"; its broker-wide default is {brokers[0]}" if brokers else ""
                warnings.append(f"{name} is a topic config, not a broker config: set it per topic{hint}")
                continue
            known = [*ALL_BROKER_CONFIGS, *ALL_TOPIC_CONFIGS]
            message = f"unknown config {name!r}: neither a pylog nor an Apache Kafka broker config"
            if strict:
                raise ConfigError(message + suggestion(name, known))
            warnings.append(f"ignoring {message}" + suggestion(name, known))
            continue
        d.parse(value)
        accepted[name] = value
    return accepted, warnings
