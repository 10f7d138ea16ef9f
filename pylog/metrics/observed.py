"""What a node's metrics and health checks read of it, and nothing more.

The collector and the readiness check run on the metrics listener's threads and only read; they
are given the node as this protocol, which names the services they look at (most of them exist
only once the node has started, hence the optionals). ``pylog.broker.broker.Broker`` is one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pylog.broker.control.lifecycle import BrokerLifecycle
    from pylog.broker.control.metadata import BrokerMetadata
    from pylog.broker.coordinators.group_shell import GroupShell
    from pylog.broker.coordinators.share_shell import ShareShell
    from pylog.broker.coordinators.telemetry_shell import TelemetryShell
    from pylog.broker.coordinators.txn_shell import TxnShell
    from pylog.broker.datapath.isr_manager import IsrManager
    from pylog.broker.datapath.replica_manager import ReplicaManager
    from pylog.broker.network.server import KafkaServer
    from pylog.broker.tiered.remote_log_manager import RemoteLogManager
    from pylog.clock import Clock
    from pylog.cluster.node_config import NodeSettings
    from pylog.cluster.observer import MetadataObserver
    from pylog.cluster.quorum import MetadataQuorum
    from pylog.iceberg.materializers import IcebergMaterializers
    from pylog.schema_registry.http import RegistryServer


class ObservedNode(Protocol):
    @property
    def settings(self) -> NodeSettings: ...
    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def metadata(self) -> BrokerMetadata | None: ...
    @property
    def quorum(self) -> MetadataQuorum | None: ...
    @property
    def observer(self) -> MetadataObserver | None: ...
    @property
    def lifecycle(self) -> BrokerLifecycle | None: ...
    @property
    def isr(self) -> IsrManager | None: ...
    @property
    def groups(self) -> GroupShell | None: ...
    @property
    def telemetry(self) -> TelemetryShell | None: ...
    @property
    def share_state(self) -> ShareShell | None: ...
    @property
    def txn(self) -> TxnShell | None: ...
    @property
    def remote_log(self) -> RemoteLogManager | None: ...
    @property
    def servers(self) -> list[KafkaServer]: ...
    @property
    def controller_server(self) -> KafkaServer | None: ...
    @property
    def schema_registry(self) -> RegistryServer | None: ...
    @property
    def iceberg(self) -> IcebergMaterializers: ...
    @property
    def own_client(self) -> tuple[str, Any]:
        """(bootstrap servers, client security) of the node's own clients of its listener: the
        group lag asks the leaders of partitions led elsewhere through it."""
        ...
