"""Cluster metadata: record types of ``__cluster_metadata`` and the in-memory image.

The records live in ``pylog.cluster.records``, the image in ``pylog.cluster.image``;
this module is the one-stop import for both.
"""

from pylog.cluster.image import (
    BrokerRegistration,
    MetadataApplyError,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from pylog.cluster.records import (
    LEADER_NO_CHANGE,
    NO_LEADER,
    RECORD_TYPES,
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RecordDecodeError,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    SecurityProtocol,
    TopicRecord,
    UnregisterBrokerRecord,
    decode_records,
    encode_records,
    record_from_dict,
    record_to_dict,
)

__all__ = [
    "LEADER_NO_CHANGE",
    "NO_LEADER",
    "RECORD_TYPES",
    "BrokerEndpoint",
    "BrokerRegistration",
    "ConfigRecord",
    "ConfigResourceType",
    "FeatureLevelRecord",
    "MetadataApplyError",
    "MetadataImage",
    "MetadataRecord",
    "PartitionChangeRecord",
    "PartitionImage",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RecordDecodeError",
    "RegisterBrokerRecord",
    "RemoveTopicRecord",
    "SecurityProtocol",
    "TopicImage",
    "TopicRecord",
    "UnregisterBrokerRecord",
    "decode_records",
    "encode_records",
    "record_from_dict",
    "record_to_dict",
]
