"""What a running cluster says about itself: DescribeCluster and DescribeQuorum, asked of any node.

Blocking calls on pylog's client transport, for tools (``pylog cluster``, `LocalCluster`) that want
one answer from whichever node of a list answers first, brokers and controllers alike (a
controller listener serves no Metadata, so no client bootstrap is involved).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from pylog.client.blocking import run
from pylog.client.cluster import parse_servers
from pylog.client.protocol import ConnectionSettings, KafkaConnection
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

METADATA_TOPIC = "__cluster_metadata"
MAX_RESPONSE = 64 * 1024 * 1024


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]


@dataclass(frozen=True)
class VoterState:
    node_id: int
    log_end_offset: int
    lag: int
    last_fetch_ms: int
    last_caught_up_ms: int
    directory_id: str = ""  # Kafka's text form (base64url); empty when the quorum names none


@dataclass(frozen=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[VoterState]
    observers: list[VoterState]
    endpoints: dict[int, list[str]] = field(default_factory=dict)  # voter -> NAME://host:port


def request(bootstrap: str, api_key: int, version: int, body: Any, *, timeout_s: float = 5.0) -> Any:
    """One request to the first address of ``bootstrap`` that answers; the decoded response.
    Raises OSError naming every address that did not answer."""
    return run(_request(bootstrap, api_key, version, body, timeout_s))


async def _request(bootstrap: str, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
    settings = ConnectionSettings(client_id="pylog-cluster-info", connect_timeout_s=timeout_s,
                                  request_timeout_s=timeout_s, max_response_bytes=MAX_RESPONSE,
                                  negotiate_versions=False)
    errors = []
    try:
        addresses = parse_servers(bootstrap)
    except ValueError as exc:
        raise OSError(str(exc)) from None
    for host, port in addresses:
        try:
            conn = await KafkaConnection.open(host, port, settings)
            try:
                return await conn.request(api_key, version, body)
            finally:
                await conn.close()
        except (OSError, ValueError) as exc:
            errors.append(f"{host}:{port}: {exc}")
    raise OSError("no node answered: " + "; ".join(errors))


def describe_cluster(bootstrap: str, *, timeout_s: float = 5.0, controllers: bool = False) -> ClusterInfo:
    """The cluster as a broker describes it (its controller is any live broker, which forwards),
    or, with ``controllers`` and a controller listener's address (KIP-919), the controllers and
    the active one."""
    r = request(
        bootstrap,
        ApiKey.DESCRIBE_CLUSTER,
        1,
        {"include_cluster_authorized_operations": False, "endpoint_type": 2 if controllers else 1},
        timeout_s=timeout_s,
    )
    if r.error_code:
        raise OSError(f"DescribeCluster: {ErrorCode.of(r.error_code).name}")
    return ClusterInfo(
        r.cluster_id, r.controller_id, [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers]
    )


def describe_quorum(bootstrap: str, *, timeout_s: float = 5.0) -> QuorumInfo:
    body = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    r = request(bootstrap, ApiKey.DESCRIBE_QUORUM, 2, body, timeout_s=timeout_s)
    if r.error_code:
        raise OSError(f"DescribeQuorum: {ErrorCode.of(r.error_code).name}")
    p = r.topics[0].partitions[0]

    def states(items: Any) -> list[VoterState]:
        return [
            VoterState(
                v.replica_id,
                v.log_end_offset,
                max(p.high_watermark - v.log_end_offset, 0),
                v.last_fetch_timestamp,
                v.last_caught_up_timestamp,
                _dir_text(v.replica_directory_id),
            )
            for v in items
        ]

    endpoints = {n.node_id: [f"{li.name}://{li.host}:{li.port}" for li in n.listeners] for n in r.nodes}
    voters, observers = states(p.current_voters), states(p.observers)
    return QuorumInfo(p.leader_id, p.leader_epoch, p.high_watermark, voters, observers, endpoints)


def _dir_text(u: uuid.UUID | None) -> str:
    from pylog.cluster.voters import directory_id_str

    return "" if u is None or u.int == 0 else directory_id_str(u)
