"""Apache Kafka 4.3's broker and topic config names, every one known to pylog.

The tables are Kafka 4.3's own (``AbstractKafkaConfig.CONFIG_DEF``, the ConfigDefs it merges, the
dynamic-only ``QuotaConfig.brokerQuotaConfigs`` and ``LogConfig``'s topic configs; internal
configs left out, as Kafka's documentation leaves them): each name is accepted, described with its
Kafka default, and pylog's list holds no name Kafka 4.3 does not have.
"""

from __future__ import annotations

from pylog import kafka_configs as kafka
from pylog.config import (
    ALL_BROKER_CONFIGS,
    ALL_TOPIC_CONFIGS,
    BrokerConfig,
    check_static_broker_configs,
    validate_topic_configs,
)

KAFKA_43_BROKER_CONFIGS = (
    "add.partitions.to.txn.retry.backoff.max.ms", "add.partitions.to.txn.retry.backoff.ms",
    "advertised.listeners", "alter.config.policy.class.name", "alter.log.dirs.replication.quota.window.num",
    "alter.log.dirs.replication.quota.window.size.seconds", "authorizer.class.name",
    "auto.create.topics.enable", "auto.leader.rebalance.enable", "background.threads",
    "broker.heartbeat.interval.ms", "broker.id", "broker.rack", "broker.session.timeout.ms",
    "client.quota.callback.class", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "config.providers", "connection.failed.authentication.delay.ms",
    "connections.max.idle.ms", "connections.max.reauth.ms", "controlled.shutdown.enable",
    "controller.listener.names", "controller.quorum.append.linger.ms", "controller.quorum.auto.join.enable",
    "controller.quorum.bootstrap.servers", "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms", "controller.quorum.fetch.max.bytes",
    "controller.quorum.fetch.snapshot.max.bytes", "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms",
    "controller.quorum.voters", "controller.quota.window.num", "controller.quota.window.size.seconds",
    "controller.socket.timeout.ms", "cordoned.log.dirs", "create.topic.policy.class.name",
    "default.replication.factor", "delegation.token.expiry.check.interval.ms",
    "delegation.token.expiry.time.ms", "delegation.token.max.lifetime.ms", "delegation.token.secret.key",
    "delete.records.purgatory.purge.interval.requests", "delete.topic.enable", "early.start.listeners",
    "fetch.max.bytes", "fetch.purgatory.purge.interval.requests",
    "follower.fetch.last.tiered.offset.enable", "follower.replication.throttled.rate",
    "group.consumer.assignment.interval.ms", "group.consumer.assignors",
    "group.consumer.heartbeat.interval.ms", "group.consumer.max.assignment.interval.ms",
    "group.consumer.max.heartbeat.interval.ms", "group.consumer.max.session.timeout.ms",
    "group.consumer.max.size", "group.consumer.migration.policy",
    "group.consumer.min.assignment.interval.ms", "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.min.session.timeout.ms", "group.consumer.session.timeout.ms",
    "group.coordinator.append.linger.ms", "group.coordinator.background.threads",
    "group.coordinator.cached.buffer.max.bytes", "group.coordinator.rebalance.protocols",
    "group.coordinator.threads", "group.initial.rebalance.delay.ms", "group.max.session.timeout.ms",
    "group.max.size", "group.min.session.timeout.ms", "group.share.assignment.interval.ms",
    "group.share.assignors", "group.share.delivery.count.limit", "group.share.heartbeat.interval.ms",
    "group.share.max.assignment.interval.ms", "group.share.max.delivery.count.limit",
    "group.share.max.heartbeat.interval.ms", "group.share.max.partition.max.record.locks",
    "group.share.max.record.lock.duration.ms", "group.share.max.session.timeout.ms",
    "group.share.max.share.sessions", "group.share.max.size", "group.share.min.assignment.interval.ms",
    "group.share.min.delivery.count.limit", "group.share.min.heartbeat.interval.ms",
    "group.share.min.partition.max.record.locks", "group.share.min.record.lock.duration.ms",
    "group.share.min.session.timeout.ms", "group.share.partition.max.record.locks",
    "group.share.record.lock.duration.ms", "group.share.session.timeout.ms",
    "group.streams.assignment.interval.ms", "group.streams.heartbeat.interval.ms",
    "group.streams.initial.rebalance.delay.ms", "group.streams.max.assignment.interval.ms",
    "group.streams.max.heartbeat.interval.ms", "group.streams.max.session.timeout.ms",
    "group.streams.max.size", "group.streams.max.standby.replicas",
    "group.streams.min.assignment.interval.ms", "group.streams.min.heartbeat.interval.ms",
    "group.streams.min.session.timeout.ms", "group.streams.num.standby.replicas",
    "group.streams.session.timeout.ms", "initial.broker.registration.timeout.ms",
    "inter.broker.listener.name", "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters",
    "leader.imbalance.check.interval.seconds", "leader.replication.throttled.rate",
    "listener.security.protocol.map", "listeners", "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms", "log.cleaner.enable",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms", "log.cleaner.threads",
    "log.cleanup.policy", "log.dir", "log.dir.failure.timeout.ms", "log.dirs",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.flush.offset.checkpoint.interval.ms",
    "log.flush.scheduler.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.index.interval.bytes", "log.index.size.max.bytes", "log.local.retention.bytes",
    "log.local.retention.ms", "log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type", "log.preallocate", "log.retention.bytes",
    "log.retention.check.interval.ms", "log.retention.hours", "log.retention.minutes", "log.retention.ms",
    "log.roll.hours", "log.roll.jitter.hours", "log.roll.jitter.ms", "log.roll.ms", "log.segment.bytes",
    "log.segment.delete.delay.ms", "max.connection.creation.rate", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.incremental.fetch.session.cache.slots", "max.request.partition.size.limit", "message.max.bytes",
    "metadata.log.dir", "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms", "metadata.log.segment.bytes", "metadata.log.segment.ms",
    "metadata.max.idle.interval.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms",
    "metric.reporters", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
    "min.insync.replicas", "node.id", "num.io.threads", "num.network.threads", "num.partitions",
    "num.recovery.threads.per.data.dir", "num.replica.alter.log.dirs.threads", "num.replica.fetchers",
    "offset.metadata.max.bytes", "offsets.commit.timeout.ms", "offsets.load.buffer.size",
    "offsets.retention.check.interval.ms", "offsets.retention.minutes", "offsets.topic.compression.codec",
    "offsets.topic.num.partitions", "offsets.topic.replication.factor", "offsets.topic.segment.bytes",
    "principal.builder.class", "process.roles", "producer.id.expiration.ms",
    "producer.purgatory.purge.interval.requests", "queued.max.request.bytes", "queued.max.requests",
    "quota.window.num", "quota.window.size.seconds", "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms", "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size", "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.copy.quota.window.num", "remote.log.manager.copy.quota.window.size.seconds",
    "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.fetch.quota.window.num", "remote.log.manager.fetch.quota.window.size.seconds",
    "remote.log.manager.follower.thread.pool.size", "remote.log.manager.task.interval.ms",
    "remote.log.manager.thread.pool.size", "remote.log.metadata.custom.metadata.max.bytes",
    "remote.log.metadata.manager.class.name", "remote.log.metadata.manager.class.path",
    "remote.log.metadata.manager.impl.prefix", "remote.log.metadata.manager.listener.name",
    "remote.log.reader.max.pending.tasks", "remote.log.reader.threads",
    "remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path",
    "remote.log.storage.manager.impl.prefix", "remote.log.storage.system.enable",
    "replica.alter.log.dirs.io.max.bytes.per.second", "replica.fetch.backoff.ms", "replica.fetch.max.bytes",
    "replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "replica.fetch.wait.max.ms",
    "replica.high.watermark.checkpoint.interval.ms", "replica.lag.time.max.ms", "replica.selector.class",
    "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms", "replication.quota.window.num",
    "replication.quota.window.size.seconds", "request.timeout.ms", "sasl.client.callback.handler.class",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.login.callback.handler.class", "sasl.login.class",
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms",
    "sasl.mechanism.controller.protocol", "sasl.mechanism.inter.broker.protocol",
    "sasl.oauthbearer.assertion.algorithm", "sasl.oauthbearer.assertion.claim.aud",
    "sasl.oauthbearer.assertion.claim.exp.seconds", "sasl.oauthbearer.assertion.claim.iss",
    "sasl.oauthbearer.assertion.claim.jti.include", "sasl.oauthbearer.assertion.claim.nbf.seconds",
    "sasl.oauthbearer.assertion.claim.sub", "sasl.oauthbearer.assertion.file",
    "sasl.oauthbearer.assertion.private.key.file", "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.template.file", "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwt.retriever.class", "sasl.oauthbearer.jwt.validator.class",
    "sasl.oauthbearer.scope", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url", "sasl.server.callback.handler.class",
    "sasl.server.max.receive.size", "security.inter.broker.protocol", "security.providers",
    "share.coordinator.append.linger.ms", "share.coordinator.cached.buffer.max.bytes",
    "share.coordinator.load.buffer.size", "share.coordinator.snapshot.update.records.per.snapshot",
    "share.coordinator.state.topic.compression.codec", "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.num.partitions", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.segment.bytes", "share.coordinator.threads",
    "share.coordinator.write.timeout.ms", "share.fetch.purgatory.purge.interval.requests",
    "socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms",
    "socket.listen.backlog.size", "socket.receive.buffer.bytes", "socket.request.max.bytes",
    "socket.send.buffer.bytes", "ssl.allow.dn.changes", "ssl.allow.san.changes", "ssl.cipher.suites",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class", "ssl.key.password", "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.keystore.type", "ssl.principal.mapping.rules", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm", "ssl.truststore.certificates",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type", "telemetry.max.bytes",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms", "transaction.max.timeout.ms",
    "transaction.partition.verification.enable",
    "transaction.remove.expired.transaction.cleanup.interval.ms", "transaction.state.log.load.buffer.size",
    "transaction.state.log.min.isr", "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes",
    "transaction.two.phase.commit.enable", "transactional.id.expiration.ms",
    "unclean.leader.election.enable",
)

KAFKA_43_TOPIC_CONFIGS = (
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
)

# the names new since Kafka 4.1 and how Kafka 4.3 lets them change (DynamicBrokerConfig)
NEW_SINCE_41 = {
    "config.providers": kafka.CLUSTER_WIDE,
    "controller.quorum.auto.join.enable": kafka.READ_ONLY,
    "controller.quorum.fetch.max.bytes": kafka.READ_ONLY,
    "controller.quorum.fetch.snapshot.max.bytes": kafka.READ_ONLY,
    "cordoned.log.dirs": kafka.PER_BROKER,
    "follower.fetch.last.tiered.offset.enable": kafka.CLUSTER_WIDE,
    "group.consumer.assignment.interval.ms": kafka.CLUSTER_WIDE,
    "group.consumer.max.assignment.interval.ms": kafka.READ_ONLY,
    "group.consumer.min.assignment.interval.ms": kafka.READ_ONLY,
    "group.coordinator.background.threads": kafka.READ_ONLY,
    "group.coordinator.cached.buffer.max.bytes": kafka.CLUSTER_WIDE,
    "group.share.assignment.interval.ms": kafka.CLUSTER_WIDE,
    "group.share.max.assignment.interval.ms": kafka.READ_ONLY,
    "group.share.max.delivery.count.limit": kafka.READ_ONLY,
    "group.share.max.partition.max.record.locks": kafka.READ_ONLY,
    "group.share.min.assignment.interval.ms": kafka.READ_ONLY,
    "group.share.min.delivery.count.limit": kafka.READ_ONLY,
    "group.share.min.partition.max.record.locks": kafka.READ_ONLY,
    "group.streams.assignment.interval.ms": kafka.CLUSTER_WIDE,
    "group.streams.initial.rebalance.delay.ms": kafka.READ_ONLY,
    "group.streams.max.assignment.interval.ms": kafka.READ_ONLY,
    "group.streams.min.assignment.interval.ms": kafka.READ_ONLY,
    "remote.log.manager.follower.thread.pool.size": kafka.CLUSTER_WIDE,
    "replica.alter.log.dirs.io.max.bytes.per.second": kafka.CLUSTER_WIDE,  # Kafka's dynamic-only quota
    "share.coordinator.cached.buffer.max.bytes": kafka.CLUSTER_WIDE,
}


def test_every_kafka_43_broker_config_is_known_and_described() -> None:
    assert len(KAFKA_43_BROKER_CONFIGS) == len(set(KAFKA_43_BROKER_CONFIGS)) == 343
    unknown = [n for n in KAFKA_43_BROKER_CONFIGS if n not in ALL_BROKER_CONFIGS]
    assert unknown == []
    described = {r.name: r for r in BrokerConfig({}).describe()}
    assert [n for n in KAFKA_43_BROKER_CONFIGS if n not in described] == []
    # accepted at start (a properties file copied from a Kafka 4.3 broker), each with its default
    defaults = {n: ALL_BROKER_CONFIGS[n].default for n in KAFKA_43_BROKER_CONFIGS}
    defaults = {n: v for n, v in defaults.items() if v is not None}
    assert check_static_broker_configs(defaults) == (defaults, [])


def test_every_kafka_43_topic_config_is_known_and_described() -> None:
    assert len(KAFKA_43_TOPIC_CONFIGS) == len(set(KAFKA_43_TOPIC_CONFIGS)) == 33
    assert [n for n in KAFKA_43_TOPIC_CONFIGS if n not in ALL_TOPIC_CONFIGS] == []
    described = {r.name for r in BrokerConfig({}).describe_topic({})}
    assert [n for n in KAFKA_43_TOPIC_CONFIGS if n not in described] == []
    validate_topic_configs({n: ALL_TOPIC_CONFIGS[n].default or "" for n in KAFKA_43_TOPIC_CONFIGS
                            if ALL_TOPIC_CONFIGS[n].default is not None})


def test_pylogs_kafka_table_is_kafka_43s() -> None:
    """No name pylog takes for a Kafka config that Kafka 4.3 does not have."""
    assert kafka.KAFKA_VERSION == "4.3"
    assert sorted(kafka.BROKER_CONFIGS) == sorted(KAFKA_43_BROKER_CONFIGS)
    assert sorted(kafka.TOPIC_CONFIGS) == sorted(KAFKA_43_TOPIC_CONFIGS)


def test_the_new_names_change_as_kafka_43_lets_them() -> None:
    for name, mode in NEW_SINCE_41.items():
        assert kafka.BROKER_CONFIGS[name][2] == mode, name
        assert ALL_BROKER_CONFIGS[name].read_only == (mode == kafka.READ_ONLY), name
    rate = ALL_BROKER_CONFIGS["replica.alter.log.dirs.io.max.bytes.per.second"]
    assert rate.acted_on and rate.default == "9223372036854775807"  # pylog throttles log dir moves
