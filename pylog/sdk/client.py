"""The SDK's Kafka client: pylog's client transport (`pylog.client`), under the names the SDK's
modules and the widgets use.

``security`` takes Kafka client settings (``{"security.protocol": "SASL_SSL", "sasl.mechanism":
"SCRAM-SHA-256", "sasl.username": ..., "sasl.password": ..., "ssl.ca.location": "ca.pem"}``, see
``pylog.security.client``): connections then start with TLS and authenticate before the first
request, and are replaced before a SASL session lifetime granted by the broker runs out.
"""

from __future__ import annotations

from pylog.client.cluster import READ_COMMITTED, KafkaClient, client_security, parse_servers
from pylog.client.errors import KafkaError
from pylog.client.metadata import ClusterMetadata, PartitionMetadata, TopicMetadata
from pylog.client.protocol import KafkaConnection
from pylog.protocol.api import ApiKey

PRODUCE, FETCH, LIST_OFFSETS, METADATA = ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA

__all__ = [
    "FETCH",
    "LIST_OFFSETS",
    "METADATA",
    "PRODUCE",
    "READ_COMMITTED",
    "ClusterMetadata",
    "KafkaClient",
    "KafkaConnection",
    "KafkaError",
    "PartitionMetadata",
    "TopicMetadata",
    "client_security",
    "parse_servers",
]
