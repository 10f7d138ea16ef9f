"""A pylog node (Kafka's KafkaRaftServer): broker, controller or both, wired from explicit parts.

Start order: the metadata quorum (replays ``__cluster_metadata``), the controller listener and
the Raft transport, then the broker side: bind the client listeners, register with the active
controller, wait until the image holds that registration (caught up), open the partition logs
the image names, load the coordinators, and once the controller has unfenced this broker,
accept clients. A node without ``controller.quorum.voters`` is a quorum of one and takes the
same path in-process. Stop order is the reverse, after a controlled shutdown in a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pylog.broker.access.audit_shell import AuditShell
from pylog.broker.access.authorization import Authorization
from pylog.broker.control.broker_channels import BrokerChannels
from pylog.broker.control.controller_channel import ControllerChannel
from pylog.broker.control.controller_client import ControllerClient
from pylog.broker.control.controller_duties import ControllerDuties
from pylog.broker.control.lifecycle import BrokerLifecycle
from pylog.broker.control.metadata import BrokerMetadata, MetadataSource, load_meta_properties
from pylog.broker.control.publisher import ReplicaPublisher
from pylog.broker.coordinators.coordinator_shell import ShellServices
from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.producer_ids import ProducerIdManager
from pylog.broker.coordinators.share_shell import SHARE_STATE_TOPIC, ShareShell
from pylog.broker.coordinators.telemetry_shell import TelemetryShell
from pylog.broker.coordinators.txn_markers import MarkerWriter
from pylog.broker.coordinators.txn_shell import TxnShell
from pylog.broker.datapath.dir_lock import DataDirLock, lock_data_dir
from pylog.broker.datapath.fetch_session import FetchSessionCache
from pylog.broker.datapath.isr_manager import IsrManager
from pylog.broker.datapath.log_dirs import check_log_dirs, configured_log_dirs
from pylog.broker.datapath.maintenance import Maintenance
from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_fetcher import ReplicaFetcherManager
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.handlers import BrokerServices, ControllerServices, client_handlers, controller_handlers
from pylog.broker.network.handler_table import HandlerTable
from pylog.broker.network.server import KafkaServer
from pylog.broker.network.throttling import QuotaEnforcer
from pylog.broker.tiered.remote_log_manager import RemoteLogManager
from pylog.broker.tiered.remote_reads import RemoteReads
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster.bootstrap import read_bootstrap
from pylog.cluster.image import MetadataImage
from pylog.cluster.metadata_fetch import MetadataFetches
from pylog.cluster.node_config import Listener, NodeSettings
from pylog.cluster.observer import MetadataObserver
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.quorum_addresses import QuorumAddresses
from pylog.cluster.quorum_fetcher import QuorumFetcher
from pylog.cluster.raft_transport import RaftTransport
from pylog.cluster.voters import Endpoint, VoterNode, VoterSet
from pylog.config import BrokerConfig, ConfigError
from pylog.iceberg.materializers import IcebergMaterializers
from pylog.metrics.node import NodeMetrics
from pylog.quotas.client import ClientQuotas
from pylog.schema_registry.validation import SchemaValidation
from pylog.security.node import NodeSecurity, image_credentials
from pylog.security.quotas import ConnectionQuotas
from pylog.tiered.settings import RemoteTierSettings
from pylog.txn import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)

TICK_MS = 50
CONTROLLED_SHUTDOWN_S = 10.0


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        data_dir: Path | str,
        *,
        listen: tuple[str, int] | None = ("127.0.0.1", 9092),
        advertised: tuple[str, int] | None = None,
        settings: NodeSettings | None = None,
        clock: Clock = SYSTEM_CLOCK,
        log_dirs: Sequence[Path] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.settings = settings or NodeSettings.from_config(config, listen=listen)
        self.data_dir = Path(data_dir).resolve()
        self._advertised = advertised
        self.node_id = self.settings.node_id
        def source() -> BrokerMetadata | MetadataQuorum | None:
            return self.metadata or self.quorum  # the image is there once started

        def image() -> MetadataImage | None:
            m = source()
            return m.image if m is not None else None

        def started_image() -> MetadataImage:
            m = source()
            assert m is not None, "the broker has not started"
            return m.image

        self.authorization = Authorization.from_config(config, image)
        self.audit = AuditShell(config, clock)
        self.authorization.audit = self.audit
        self.security = NodeSecurity.from_config(config, self.settings, image_credentials(image))
        self.quotas = ConnectionQuotas.from_config(config, [li.name for li in self.settings.listeners])
        self.client_quotas = QuotaEnforcer(
            ClientQuotas.from_config(config), image, self.quotas, clock=clock.monotonic_ms
        )
        # JBOD: the data directory first, then the other directories of log.dirs
        self.log_dirs = list(log_dirs) if log_dirs else configured_log_dirs(config, self.data_dir)
        self.replicas = ReplicaManager(
            config, self.data_dir, clock.wall_ms, clock.monotonic_ms, log_dirs=self.log_dirs
        )
        self.maintenance = Maintenance(config, self.replicas, clock)
        self.cluster_id = ""
        self.directory_id: uuid.UUID | None = None
        self.quorum: MetadataQuorum | None = None
        self.addresses: QuorumAddresses | None = None
        self.fetcher: QuorumFetcher | None = None
        self.observer: MetadataObserver | None = None
        self.transport: RaftTransport | None = None
        self.controller_table: HandlerTable | None = None
        self.controller_server: KafkaServer | None = None
        self.duties: ControllerDuties | None = None
        self.metadata: BrokerMetadata | None = None
        self.channel: ControllerChannel | None = None
        self.controller: ControllerClient | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.groups: GroupShell | None = None
        self.telemetry: TelemetryShell | None = None  # what clients push (KIP-714), re-exported by /metrics
        self.share_state: ShareShell | None = None
        self.txn: TxnShell | None = None
        self.markers: MarkerWriter | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.isr: IsrManager | None = None
        self.remote_log: RemoteLogManager | None = None
        self.servers: list[KafkaServer] = []
        self.schema_registry: Any = None  # pylog.schema_registry.http.RegistryServer when configured
        self.flight: list[Any] = []  # pylog.flight.FlightService per pylog.flight.listeners
        self.schema_validation = SchemaValidation(None)
        # the remote tier (remote.log.storage.system.enable without a usable store stops the start here)
        self.remote_tier = RemoteTierSettings.from_config(config)
        # Iceberg tables of topics (bad catalog settings stop the start here)
        self.iceberg = IcebergMaterializers(self.node_id, config, self.data_dir, started_image,
                                            self._own_client, clock)
        self.stopping = False
        # /metrics and the health checks (pylog.metrics.listeners); bad settings stop the start here
        listeners = config.raw("pylog.metrics.listeners")
        self.metrics = NodeMetrics(self, listeners, self._metrics_ssl_context()) if listeners else None
        self.dir_lock: DataDirLock | None = None
        self.log_dir_locks: list[DataDirLock] = []

    # --- addresses ----------------------------------------------------------------------------

    @property
    def server(self) -> KafkaServer | None:
        """The first client listener."""
        return self.servers[0] if self.servers else None

    @property
    def bound_address(self) -> tuple[str, int]:
        server = self.server or self.controller_server
        assert server is not None
        return server.host, server.port

    @property
    def broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch if self.lifecycle is not None else -1

    def advertised_listeners(self) -> list[Listener]:
        """What clients are told to connect to, one per client listener."""
        out = []
        named = {li.name: li for li in self.settings.advertised}
        for server in self.servers:
            li = named.get(server.listener)
            if li is not None:
                out.append(li if li.port else li.with_port(server.port))
                continue
            host, port = server.host, server.port
            if self._advertised is not None and server is self.servers[0]:
                host, port = self._advertised[0], self._advertised[1] or port
            if host in ("0.0.0.0", "::", ""):
                host = socket.getfqdn()
            proto = next(x.security_protocol for x in self.settings.listeners if x.name == server.listener)
            out.append(Listener(server.listener, host, port, proto))
        return out

    # --- start ----------------------------------------------------------------------------------

    async def start(self) -> None:
        self.dir_lock = lock_data_dir(self.data_dir)  # first: nothing in the directory is touched before
        if self.metrics is not None:  # from the start: ready says why not until the node serves
            self.metrics.start()
        s = self.settings
        self.audit.start()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id, self.directory_id = self._meta_properties()
        self._open_log_dirs()
        s = self.settings
        self.addresses = QuorumAddresses(
            s.controller_listener_name,
            voters={v.node_id: (v.host, v.port) for v in s.voters},
            bootstrap=s.bootstrap_servers,
        )
        if s.is_controller:
            await self._start_controller()
        if s.is_broker:
            await self._start_broker()

    def _metrics_ssl_context(self) -> ssl.SSLContext | None:
        """What ``https://`` metrics listeners serve with: the first TLS client listener's."""
        listeners = self.settings.broker_listeners or self.settings.listeners
        names = [li.name for li in listeners]
        securities = [sec for n in names if (sec := self.security.listener(n)) is not None]
        return next((sec.ssl_context for sec in securities if sec.ssl_context is not None), None)

    def _meta_properties(self) -> tuple[str, uuid.UUID]:
        wanted = self.config.raw("cluster.id")
        meta = self.data_dir / "meta.properties"
        if not self.settings.standalone and not wanted and not meta.exists():
            raise ConfigError(
                "a node of a multi-node cluster needs cluster.id (the same on every node) to format "
                f"{self.data_dir}; `pylog cluster start` chooses one for you"
            )
        try:
            return load_meta_properties(self.data_dir, self.node_id, wanted)
        except (RuntimeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None

    def _open_log_dirs(self) -> None:
        """Lock every other log dir and give it its ``meta.properties`` (its own directory id), then
        let the replica manager recover and index them, all before a partition opens."""
        dirs = self.replicas.log_dirs
        dirs.directory_ids[self.data_dir] = self.directory_id  # type: ignore[assignment]
        check_log_dirs(dirs.dirs)
        for d in dirs.dirs[1:]:
            self.log_dir_locks.append(lock_data_dir(d))
            try:
                dirs.directory_ids[d] = load_meta_properties(d, self.node_id, self.cluster_id)[1]
            except (RuntimeError, ValueError) as exc:
                raise ConfigError(f"log directory {d}: {exc}") from None
        self.replicas.open_log_dirs()

    def _static_voters(self) -> VoterSet | None:
        """controller.quorum.voters as a voter set (endpoints on the controller listener), or None."""
        s = self.settings
        if not s.voters:
            return None
        name = s.controller_listener_name
        return VoterSet(
            tuple(VoterNode(v.node_id, None, (Endpoint(name, v.host, v.port),), 0, 0) for v in s.voters)
        )

    async def _start_controller(self) -> None:
        s, cfg = self.settings, self.config
        if not s.standalone:
            self.transport = RaftTransport(
                self.node_id,
                self.cluster_id,
                {},
                request_timeout_s=s.request_timeout_ms / 1000,
                security=self.security.controller,
            )
        election_ticks = max(2, s.election_timeout_ms // TICK_MS)
        quorum = self.quorum = MetadataQuorum(
            self.data_dir,
            self.node_id,
            voters=self._static_voters() or (self.node_id,),
            dynamic=s.dynamic_quorum,
            directory_id=self.directory_id,
            tick_ms=TICK_MS,
            election_timeout_ticks=election_ticks,
            heartbeat_ticks=max(1, election_ticks // 5),
            send=self.transport.send if self.transport is not None else None,
            default_num_partitions=cfg.int("num.partitions"),
            default_replication_factor=cfg.int("default.replication.factor"),
            delete_topic_enable=cfg.bool("delete.topic.enable"),
            unclean_leader_election=cfg.bool("unclean.leader.election.enable"),
            session_timeout_ms=s.session_timeout_ms,
            snapshot_bytes=cfg.int("metadata.log.max.record.bytes.between.snapshots"),
            bootstrap=read_bootstrap(self.data_dir),
            clock=self.clock,
            broker_settings=cfg.raw,
        )
        self.controller_table = controller_handlers(
            ControllerServices(
                cluster_id=self.cluster_id,
                config=cfg,
                settings=s,
                quorum=quorum,
                authz=self.authorization,
                controller_security=self.security.controller,
            )
        )
        await quorum.start()
        addresses = self.addresses
        assert addresses is not None
        transport = self.transport

        def voters_changed(_vs: VoterSet | None) -> None:
            addresses.set_voters(*quorum.replicated_voters())
            if transport is not None:
                transport.set_peers(
                    {n: a for n, a in addresses.all().items() if n >= 0 and n in _replicated(quorum)}
                )

        quorum.add_voters_listener(voters_changed)
        listener = s.controller_listener
        if listener is not None:
            self.controller_server = self._server(self.controller_table, listener, client_quotas=False)
            await self.controller_server.start()
        if transport is not None:
            transport.start()
            self.fetcher = QuorumFetcher(quorum, self._metadata_fetches(addresses))
            self.fetcher.start()
        self.duties = ControllerDuties(
            quorum,
            rebalance=cfg.bool("auto.leader.rebalance.enable"),
            rebalance_interval_s=cfg.int("leader.imbalance.check.interval.seconds"),
        )
        self.duties.start()
        if s.standalone:
            await quorum.wait_for_controller()

    def _metadata_fetches(self, addresses: QuorumAddresses) -> MetadataFetches:
        """How this node reads the metadata log from the controllers when it is no voter in touch."""
        timeout_s = self.settings.request_timeout_ms / 1000
        return MetadataFetches(self.node_id, self.cluster_id, addresses, timeout_s, self.security.controller)

    async def _start_broker(self) -> None:
        s, cfg = self.settings, self.config
        addresses = self.addresses
        assert addresses is not None
        source: MetadataSource
        if self.quorum is not None:
            source = self.quorum
        else:  # a broker that is not a voter follows the log from the active controller
            source = self.observer = MetadataObserver(self._metadata_fetches(addresses))
            await self.observer.start()
        self.channel = ControllerChannel(
            self.node_id,
            addresses=addresses,
            leader_hint=lambda: source.leader_id,
            local=lambda: self.controller_table,
            request_timeout_s=cfg.int("request.timeout.ms") / 1000,
            security=self.security.controller,
        )
        controller = self.controller = ControllerClient(self.channel, self.cluster_id)
        metadata = self.metadata = BrokerMetadata(source, self.cluster_id, clock=self.clock)
        self.replicas.partition_exists = lambda topic, index: source.image.partition(topic, index) is not None
        self.producer_ids = ProducerIdManager(controller, self.node_id, lambda: self.broker_epoch)
        shared = ShellServices(self.node_id, self.replicas, metadata, controller, self.clock.wall_ms)
        groups = self.groups = GroupShell(cfg, shared)
        # Replica fetches and transaction markers each have their own connections (BrokerChannels).
        listener, security = s.inter_broker_listener_name, self.security.inter_broker
        channels = BrokerChannels(
            self.node_id, listener, lambda: source.image, security, client_id=f"pylog-replica-{self.node_id}"
        )
        marker_channels = BrokerChannels(
            self.node_id, listener, lambda: source.image, security, client_id=f"pylog-txn-{self.node_id}"
        )
        timeout_s = cfg.int("request.timeout.ms") / 1000
        markers = self.markers = MarkerWriter(
            self.node_id, self.replicas, metadata, marker_channels, request_timeout_s=timeout_s
        )
        txn = self.txn = TxnShell(cfg, shared, producer_ids=self.producer_ids, groups=groups, markers=markers)
        share = self.share_state = ShareShell(cfg, shared)
        self.fetchers = ReplicaFetcherManager(
            self.node_id,
            channels,
            wait_max_ms=cfg.int("replica.fetch.wait.max.ms"),
            min_bytes=cfg.int("replica.fetch.min.bytes"),
            max_bytes=cfg.int("replica.fetch.response.max.bytes"),
            partition_max_bytes=cfg.int("replica.fetch.max.bytes"),
            backoff_ms=cfg.int("replica.fetch.backoff.ms"),
            request_timeout_ms=cfg.int("request.timeout.ms"),
            now_ms=self.clock.wall_ms,
            quota=self.replicas.follower_quota,
            monotonic_ms=self.clock.monotonic_ms,
            topic_stats=self.replicas.topic_stats,
        )
        metadata.add_publisher(
            ReplicaPublisher(
                self.node_id,
                self.replicas,
                followers=self.fetchers,
                coordinators={OFFSETS_TOPIC: groups, TRANSACTION_STATE_TOPIC: txn, SHARE_STATE_TOPIC: share},
                on_open=self._opened,
                on_topic_removed=lambda _topic: self.maintenance.request_release(),
                set_dynamic_configs=self._set_dynamic_configs,
                now_ms=self.clock.wall_ms,
            )
        )
        self.isr = IsrManager(
            self.node_id,
            controller,
            self.replicas,
            broker_epoch=lambda: self.broker_epoch,
            lag_time_max_ms=cfg.int("replica.lag.time.max.ms"),
            now_ms=self.clock.wall_ms,
            eligible=lambda broker: (b := source.image.brokers.get(broker)) is not None and b.usable,
        )
        services = BrokerServices(
            node_id=self.node_id,
            config=cfg,
            metadata=metadata,
            replicas=self.replicas,
            groups=groups,
            share=share,
            txn=txn,
            producer_ids=self.producer_ids,
            controller=controller,
            channel=self.channel,
            isr=self.isr,
            stopping=lambda: self.stopping,
            schema_validation=self.schema_validation,
            authz=self.authorization,
            telemetry=(telemetry := TelemetryShell(cfg, lambda: source.image, self.clock)),
            fetch_sessions=FetchSessionCache(cfg.int("max.incremental.fetch.session.cache.slots")),
            monotonic_ms=self.clock.monotonic_ms,
        )
        self.telemetry = telemetry
        table = client_handlers(services)
        for li in s.broker_listeners:
            server = self._server(table, li)
            await server.start(serve=False)
            self.servers.append(server)
        if cfg.raw("pylog.flight.listeners"):  # Arrow Flight, on its own threads, registered as a listener
            from pylog.flight.node import broker_flight
            self.flight = broker_flight(self)
        lifecycle = self.lifecycle = BrokerLifecycle(
            controller,
            self.node_id,
            [*self.advertised_listeners(), *(f.listener for f in self.flight)],
            rack=cfg.raw("broker.rack"),
            heartbeat_interval_s=s.heartbeat_interval_ms / 1000,
            metadata_offset=lambda: source.image.offset,
        )
        await lifecycle.register()
        self.isr.start()
        lifecycle.start()
        await metadata.wait_for(self._registered_in_image)
        await metadata.start_publishing()
        await groups.start()  # replays __consumer_offsets before anyone can ask
        await share.start()  # replays __share_group_state
        await txn.start()  # replays __transaction_state; re-drives markers of preparing ones
        lifecycle.set_ready()
        await lifecycle.wait_unfenced()
        for server in self.servers:
            await server.serve()
        self.maintenance.start()
        if self.remote_tier is not None:
            self.remote_log = RemoteLogManager(
                self.node_id, self.remote_tier, self.replicas, lambda: source.image, controller,
                broker_epoch=lambda: self.broker_epoch, clock=self.clock,
            )
            await self.remote_log.start()
            if self.fetchers is not None:
                self.fetchers.tiered_offset = self.remote_log.tiered_offset
            assert self.remote_log.io is not None
            self.replicas.remote_reads = RemoteReads(
                self.remote_log.io.store, lambda: source.image,
                cache_bytes=cfg.int("pylog.remote.log.read.cache.bytes"),
                threads=cfg.int("remote.log.reader.threads"),
                fetch_max_wait_ms=cfg.int("remote.fetch.max.wait.ms"),
            )
        self.audit.start_topic(*self._own_client())
        await self._start_schema_registry()
        for flight_server in self.flight:
            flight_server.ready.set()
        self.iceberg.start()

    async def _start_schema_registry(self) -> None:
        listener = self.config.raw("schema.registry.listeners")
        if listener:
            from pylog.schema_registry.auth import registry_security
            from pylog.schema_registry.http import RegistryServer
            from pylog.schema_registry.validation import known_ids_of
            from pylog.security.tls import node_client_context

            server, security = self._own_client_listener()
            access = registry_security(
                [self.security.listener(s.listener) for s in self.servers],
                self.authorization,
                lambda name: node_client_context(lambda key: self.config.listener_raw(name, key)),
                audit=self.audit,
                clock=self.clock,
            )
            self.schema_registry = RegistryServer(
                listener, f"{_local(server.host)}:{server.port}", node_id=self.node_id, security=security,
                access=access, clock=self.clock,
            )
            await self.schema_registry.start()
            self.schema_validation.known_ids = known_ids_of(self.schema_registry.registry.state.by_id)

    def _own_client(self) -> tuple[str, Any]:
        """(bootstrap servers, client security) for this node's own clients of its listener."""
        server, security = self._own_client_listener()
        return f"{_local(server.host)}:{server.port}", security

    @property
    def own_client(self) -> tuple[str, Any]:
        """(bootstrap servers, client security) for this node's own clients of its listener (the
        metrics ask other leaders for their high watermarks through it); known once it listens."""
        return self._own_client()

    def _own_client_listener(self) -> tuple[KafkaServer, Any]:
        """The listener this node's own clients (the schema registry's) use: the inter-broker one,
        with this node's credentials for it."""
        name = self.settings.inter_broker_listener_name
        server = next((x for x in self.servers if x.listener == name), self.servers[0])
        if server.listener != name:
            return server, None
        return server, self.security.own_client()

    def _server(self, table: HandlerTable, li: Listener, *, client_quotas: bool = True) -> KafkaServer:
        server = KafkaServer(
            table,
            li.host,
            li.port,
            self.config,
            listener=li.name,
            security=self.security.listener(li.name),
            quotas=self.quotas,
            clock=self.clock,
            client_quotas=self.client_quotas if client_quotas else None,
        )
        server.audit = self.audit
        return server

    def _registered_in_image(self, image: MetadataImage) -> bool:
        b = image.brokers.get(self.node_id)
        lifecycle = self.lifecycle
        return b is not None and lifecycle is not None and b.incarnation_id == lifecycle.incarnation_id

    # --- driven by the metadata image (called on the event loop) ----------------------------

    def _set_dynamic_configs(self, image: MetadataImage) -> None:
        self.config.set_dynamic(image.broker_configs(), image.broker_configs(self.node_id))

    def _opened(self, part: Partition) -> None:
        """A partition log was opened here (created, grown, or found on start)."""
        assert self.txn is not None
        part.on_roll = self.maintenance.request_seal
        part.txn_verifier = self.txn.verify_produce

    # --- shutdown ---------------------------------------------------------------------------

    async def stop(self) -> None:
        if self.lifecycle is not None and not self.settings.standalone and not self.stopping:
            await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_S)
        self.stopping = True
        await self.iceberg.stop()
        if self.flight:
            from pylog.flight.server import stop_flight
            await stop_flight(self.flight)
            self.flight = []
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        await self.audit.stop()
        for server in self.servers:
            await server.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self.groups is not None:
            self.groups.stop()
        if self.share_state is not None:
            self.share_state.stop()
        if self.txn is not None:
            self.txn.stop()
        if self.markers is not None:
            self.markers.close()
        if self.replicas.remote_reads is not None:
            self.replicas.remote_reads.close()
            self.replicas.remote_reads = None
        if self.remote_log is not None:
            await self.remote_log.stop()
        self.maintenance.stop()
        for part in self.replicas.snapshot():
            part.wake()
        self.replicas.mover.close()  # here, on the loop: no paused pass starts while the logs close
        await asyncio.get_running_loop().run_in_executor(None, self.replicas.close)
        if self.fetchers is not None:
            await self.fetchers.close()
        if self.isr is not None:
            await self.isr.stop()
        if self.channel is not None:
            self.channel.close()
        if self.duties is not None:
            await self.duties.stop()
        if self.controller_server is not None:
            await self.controller_server.stop()
        if self.fetcher is not None:
            await self.fetcher.close()
        if self.transport is not None:
            await self.transport.close()
        if self.observer is not None:
            await self.observer.close()
        if self.quorum is not None:
            with contextlib.suppress(Exception):
                await self.quorum.close()
        if self.metrics is not None:
            await self.metrics.stop()
        for lock in self.log_dir_locks:
            lock.release()
        if self.dir_lock is not None:
            self.dir_lock.release()


def _replicated(quorum: MetadataQuorum) -> set[int]:
    """The node ids the leader replicates to (the latest and the committed voter sets)."""
    return {v for vs in quorum.replicated_voters() for v in vs.ids}


def _local(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else f"[{host}]" if ":" in host else host
