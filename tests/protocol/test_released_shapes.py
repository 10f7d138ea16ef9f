"""pylog's definitions of the newer messages have the shapes of Kafka's released ones (Apache
Kafka 4.3's message JSON): the same versions and, field by field (common structs resolved), the
same names, types, versions, nullable versions and tagged versions. A definition that drifts from
the released protocol makes real clients' requests unreadable (a DeleteShareGroupOffsets request
without per-topic partitions) or pylog's answers unreadable to them.

The table below is the released shapes, written out: (path, type, versions, nullableVersions,
taggedVersions, tag), with "" for an absent attribute and -1 for no tag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pylog.protocol
import pytest

MESSAGES = Path(pylog.protocol.__file__).parent / "messages"

Shape = tuple[str, str, str, str, str, int]

RELEASED: dict[str, tuple[str, str, list[Shape]]] = {
    "AlterPartitionRequest": ("2-3", "0+", [
        ("BrokerId", "int32", "0+", "", "", -1),
        ("BrokerEpoch", "int64", "0+", "", "", -1),
        ("Topics", "[]TopicData", "0+", "", "", -1),
        ("Topics.TopicId", "uuid", "2+", "", "", -1),
        ("Topics.Partitions", "[]PartitionData", "0+", "", "", -1),
        ("Topics.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Topics.Partitions.LeaderEpoch", "int32", "0+", "", "", -1),
        ("Topics.Partitions.NewIsr", "[]int32", "0-2", "", "", -1),
        ("Topics.Partitions.NewIsrWithEpochs", "[]BrokerState", "3+", "", "", -1),
        ("Topics.Partitions.NewIsrWithEpochs.BrokerId", "int32", "3+", "", "", -1),
        ("Topics.Partitions.NewIsrWithEpochs.BrokerEpoch", "int64", "3+", "", "", -1),
        ("Topics.Partitions.LeaderRecoveryState", "int8", "1+", "", "", -1),
        ("Topics.Partitions.PartitionEpoch", "int32", "0+", "", "", -1),
    ]),
    "AlterPartitionResponse": ("2-3", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("Topics", "[]TopicData", "0+", "", "", -1),
        ("Topics.TopicId", "uuid", "2+", "", "", -1),
        ("Topics.Partitions", "[]PartitionData", "0+", "", "", -1),
        ("Topics.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Topics.Partitions.ErrorCode", "int16", "0+", "", "", -1),
        ("Topics.Partitions.LeaderId", "int32", "0+", "", "", -1),
        ("Topics.Partitions.LeaderEpoch", "int32", "0+", "", "", -1),
        ("Topics.Partitions.Isr", "[]int32", "0+", "", "", -1),
        ("Topics.Partitions.LeaderRecoveryState", "int8", "1+", "", "", -1),
        ("Topics.Partitions.PartitionEpoch", "int32", "0+", "", "", -1),
    ]),
    "AlterShareGroupOffsetsRequest": ("0", "0+", [
        ("GroupId", "string", "0+", "", "", -1),
        ("Topics", "[]AlterShareGroupOffsetsRequestTopic", "0+", "", "", -1),
        ("Topics.TopicName", "string", "0+", "", "", -1),
        ("Topics.Partitions", "[]AlterShareGroupOffsetsRequestPartition", "0+", "", "", -1),
        ("Topics.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Topics.Partitions.StartOffset", "int64", "0+", "", "", -1),
    ]),
    "AlterShareGroupOffsetsResponse": ("0", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("ErrorMessage", "string", "0+", "0+", "", -1),
        ("Responses", "[]AlterShareGroupOffsetsResponseTopic", "0+", "", "", -1),
        ("Responses.TopicName", "string", "0+", "", "", -1),
        ("Responses.TopicId", "uuid", "0+", "", "", -1),
        ("Responses.Partitions", "[]AlterShareGroupOffsetsResponsePartition", "0+", "", "", -1),
        ("Responses.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Responses.Partitions.ErrorCode", "int16", "0+", "", "", -1),
        ("Responses.Partitions.ErrorMessage", "string", "0+", "0+", "", -1),
    ]),
    "BrokerHeartbeatRequest": ("0-2", "0+", [
        ("BrokerId", "int32", "0+", "", "", -1),
        ("BrokerEpoch", "int64", "0+", "", "", -1),
        ("CurrentMetadataOffset", "int64", "0+", "", "", -1),
        ("WantFence", "bool", "0+", "", "", -1),
        ("WantShutDown", "bool", "0+", "", "", -1),
        ("OfflineLogDirs", "[]uuid", "1+", "", "1+", 0),
        ("CordonedLogDirs", "[]uuid", "2+", "2+", "2+", 1),
    ]),
    "BrokerHeartbeatResponse": ("0-2", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("IsCaughtUp", "bool", "0+", "", "", -1),
        ("IsFenced", "bool", "0+", "", "", -1),
        ("ShouldShutDown", "bool", "0+", "", "", -1),
    ]),
    "BrokerRegistrationRequest": ("0-4", "0+", [
        ("BrokerId", "int32", "0+", "", "", -1),
        ("ClusterId", "string", "0+", "", "", -1),
        ("IncarnationId", "uuid", "0+", "", "", -1),
        ("Listeners", "[]Listener", "0+", "", "", -1),
        ("Listeners.Name", "string", "0+", "", "", -1),
        ("Listeners.Host", "string", "0+", "", "", -1),
        ("Listeners.Port", "uint16", "0+", "", "", -1),
        ("Listeners.SecurityProtocol", "int16", "0+", "", "", -1),
        ("Features", "[]Feature", "0+", "", "", -1),
        ("Features.Name", "string", "0+", "", "", -1),
        ("Features.MinSupportedVersion", "int16", "0+", "", "", -1),
        ("Features.MaxSupportedVersion", "int16", "0+", "", "", -1),
        ("Rack", "string", "0+", "0+", "", -1),
        ("IsMigratingZkBroker", "bool", "1+", "", "", -1),
        ("LogDirs", "[]uuid", "2+", "", "", -1),
        ("PreviousBrokerEpoch", "int64", "3+", "", "", -1),
    ]),
    "BrokerRegistrationResponse": ("0-4", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("BrokerEpoch", "int64", "0+", "", "", -1),
    ]),
    "ConsumerGroupHeartbeatRequest": ("0-1", "0+", [
        ("GroupId", "string", "0+", "", "", -1),
        ("MemberId", "string", "0+", "", "", -1),
        ("MemberEpoch", "int32", "0+", "", "", -1),
        ("InstanceId", "string", "0+", "0+", "", -1),
        ("RackId", "string", "0+", "0+", "", -1),
        ("RebalanceTimeoutMs", "int32", "0+", "", "", -1),
        ("SubscribedTopicNames", "[]string", "0+", "0+", "", -1),
        ("SubscribedTopicRegex", "string", "1+", "1+", "", -1),
        ("ServerAssignor", "string", "0+", "0+", "", -1),
        ("TopicPartitions", "[]TopicPartitions", "0+", "0+", "", -1),
        ("TopicPartitions.TopicId", "uuid", "0+", "", "", -1),
        ("TopicPartitions.Partitions", "[]int32", "0+", "", "", -1),
    ]),
    "ConsumerGroupHeartbeatResponse": ("0-1", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("ErrorMessage", "string", "0+", "0+", "", -1),
        ("MemberId", "string", "0+", "0+", "", -1),
        ("MemberEpoch", "int32", "0+", "", "", -1),
        ("HeartbeatIntervalMs", "int32", "0+", "", "", -1),
        ("Assignment", "Assignment", "0+", "0+", "", -1),
        ("Assignment.TopicPartitions", "[]TopicPartitions", "0+", "", "", -1),
        ("Assignment.TopicPartitions.TopicId", "uuid", "0+", "", "", -1),
        ("Assignment.TopicPartitions.Partitions", "[]int32", "0+", "", "", -1),
    ]),
    "DeleteShareGroupOffsetsRequest": ("0", "0+", [
        ("GroupId", "string", "0+", "", "", -1),
        ("Topics", "[]DeleteShareGroupOffsetsRequestTopic", "0+", "", "", -1),
        ("Topics.TopicName", "string", "0+", "", "", -1),
    ]),
    "DeleteShareGroupOffsetsResponse": ("0", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("ErrorMessage", "string", "0+", "0+", "", -1),
        ("Responses", "[]DeleteShareGroupOffsetsResponseTopic", "0+", "", "", -1),
        ("Responses.TopicName", "string", "0+", "", "", -1),
        ("Responses.TopicId", "uuid", "0+", "", "", -1),
        ("Responses.ErrorCode", "int16", "0+", "", "", -1),
        ("Responses.ErrorMessage", "string", "0+", "0+", "", -1),
    ]),
    "DescribeShareGroupOffsetsRequest": ("0-1", "0+", [
        ("Groups", "[]DescribeShareGroupOffsetsRequestGroup", "0+", "", "", -1),
        ("Groups.GroupId", "string", "0+", "", "", -1),
        ("Groups.Topics", "[]DescribeShareGroupOffsetsRequestTopic", "0+", "0+", "", -1),
        ("Groups.Topics.TopicName", "string", "0+", "", "", -1),
        ("Groups.Topics.Partitions", "[]int32", "0+", "", "", -1),
    ]),
    "DescribeShareGroupOffsetsResponse": ("0-1", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("Groups", "[]DescribeShareGroupOffsetsResponseGroup", "0+", "", "", -1),
        ("Groups.GroupId", "string", "0+", "", "", -1),
        ("Groups.Topics", "[]DescribeShareGroupOffsetsResponseTopic", "0+", "", "", -1),
        ("Groups.Topics.TopicName", "string", "0+", "", "", -1),
        ("Groups.Topics.TopicId", "uuid", "0+", "", "", -1),
        ("Groups.Topics.Partitions", "[]DescribeShareGroupOffsetsResponsePartition", "0+", "", "", -1),
        ("Groups.Topics.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Groups.Topics.Partitions.StartOffset", "int64", "0+", "", "", -1),
        ("Groups.Topics.Partitions.LeaderEpoch", "int32", "0+", "", "", -1),
        ("Groups.Topics.Partitions.Lag", "int64", "1+", "", "", -1),
        ("Groups.Topics.Partitions.ErrorCode", "int16", "0+", "", "", -1),
        ("Groups.Topics.Partitions.ErrorMessage", "string", "0+", "0+", "", -1),
        ("Groups.ErrorCode", "int16", "0+", "", "", -1),
        ("Groups.ErrorMessage", "string", "0+", "0+", "", -1),
    ]),
    "ShareAcknowledgeRequest": ("1-2", "0+", [
        ("GroupId", "string", "0+", "0+", "", -1),
        ("MemberId", "string", "0+", "0+", "", -1),
        ("ShareSessionEpoch", "int32", "0+", "", "", -1),
        ("IsRenewAck", "bool", "2+", "", "", -1),
        ("Topics", "[]AcknowledgeTopic", "0+", "", "", -1),
        ("Topics.TopicId", "uuid", "0+", "", "", -1),
        ("Topics.Partitions", "[]AcknowledgePartition", "0+", "", "", -1),
        ("Topics.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches", "[]AcknowledgementBatch", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches.FirstOffset", "int64", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches.LastOffset", "int64", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches.AcknowledgeTypes", "[]int8", "0+", "", "", -1),
    ]),
    "ShareAcknowledgeResponse": ("1-2", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("ErrorMessage", "string", "0+", "0+", "", -1),
        ("AcquisitionLockTimeoutMs", "int32", "2+", "", "", -1),
        ("Responses", "[]ShareAcknowledgeTopicResponse", "0+", "", "", -1),
        ("Responses.TopicId", "uuid", "0+", "", "", -1),
        ("Responses.Partitions", "[]PartitionData", "0+", "", "", -1),
        ("Responses.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Responses.Partitions.ErrorCode", "int16", "0+", "", "", -1),
        ("Responses.Partitions.ErrorMessage", "string", "0+", "0+", "", -1),
        ("Responses.Partitions.CurrentLeader", "LeaderIdAndEpoch", "0+", "", "", -1),
        ("Responses.Partitions.CurrentLeader.LeaderId", "int32", "0+", "", "", -1),
        ("Responses.Partitions.CurrentLeader.LeaderEpoch", "int32", "0+", "", "", -1),
        ("NodeEndpoints", "[]NodeEndpoint", "0+", "", "", -1),
        ("NodeEndpoints.NodeId", "int32", "0+", "", "", -1),
        ("NodeEndpoints.Host", "string", "0+", "", "", -1),
        ("NodeEndpoints.Port", "int32", "0+", "", "", -1),
        ("NodeEndpoints.Rack", "string", "0+", "0+", "", -1),
    ]),
    "ShareFetchRequest": ("1-2", "0+", [
        ("GroupId", "string", "0+", "0+", "", -1),
        ("MemberId", "string", "0+", "0+", "", -1),
        ("ShareSessionEpoch", "int32", "0+", "", "", -1),
        ("MaxWaitMs", "int32", "0+", "", "", -1),
        ("MinBytes", "int32", "0+", "", "", -1),
        ("MaxBytes", "int32", "0+", "", "", -1),
        ("MaxRecords", "int32", "1+", "", "", -1),
        ("BatchSize", "int32", "1+", "", "", -1),
        ("ShareAcquireMode", "int8", "2+", "", "", -1),
        ("IsRenewAck", "bool", "2+", "", "", -1),
        ("Topics", "[]FetchTopic", "0+", "", "", -1),
        ("Topics.TopicId", "uuid", "0+", "", "", -1),
        ("Topics.Partitions", "[]FetchPartition", "0+", "", "", -1),
        ("Topics.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Topics.Partitions.PartitionMaxBytes", "int32", "0", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches", "[]AcknowledgementBatch", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches.FirstOffset", "int64", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches.LastOffset", "int64", "0+", "", "", -1),
        ("Topics.Partitions.AcknowledgementBatches.AcknowledgeTypes", "[]int8", "0+", "", "", -1),
        ("ForgottenTopicsData", "[]ForgottenTopic", "0+", "", "", -1),
        ("ForgottenTopicsData.TopicId", "uuid", "0+", "", "", -1),
        ("ForgottenTopicsData.Partitions", "[]int32", "0+", "", "", -1),
    ]),
    "ShareFetchResponse": ("1-2", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("ErrorMessage", "string", "0+", "0+", "", -1),
        ("AcquisitionLockTimeoutMs", "int32", "1+", "", "", -1),
        ("Responses", "[]ShareFetchableTopicResponse", "0+", "", "", -1),
        ("Responses.TopicId", "uuid", "0+", "", "", -1),
        ("Responses.Partitions", "[]PartitionData", "0+", "", "", -1),
        ("Responses.Partitions.PartitionIndex", "int32", "0+", "", "", -1),
        ("Responses.Partitions.ErrorCode", "int16", "0+", "", "", -1),
        ("Responses.Partitions.ErrorMessage", "string", "0+", "0+", "", -1),
        ("Responses.Partitions.AcknowledgeErrorCode", "int16", "0+", "", "", -1),
        ("Responses.Partitions.AcknowledgeErrorMessage", "string", "0+", "0+", "", -1),
        ("Responses.Partitions.CurrentLeader", "LeaderIdAndEpoch", "0+", "", "", -1),
        ("Responses.Partitions.CurrentLeader.LeaderId", "int32", "0+", "", "", -1),
        ("Responses.Partitions.CurrentLeader.LeaderEpoch", "int32", "0+", "", "", -1),
        ("Responses.Partitions.Records", "records", "0+", "0", "", -1),
        ("Responses.Partitions.AcquiredRecords", "[]AcquiredRecords", "0+", "", "", -1),
        ("Responses.Partitions.AcquiredRecords.FirstOffset", "int64", "0+", "", "", -1),
        ("Responses.Partitions.AcquiredRecords.LastOffset", "int64", "0+", "", "", -1),
        ("Responses.Partitions.AcquiredRecords.DeliveryCount", "int16", "0+", "", "", -1),
        ("NodeEndpoints", "[]NodeEndpoint", "0+", "", "", -1),
        ("NodeEndpoints.NodeId", "int32", "0+", "", "", -1),
        ("NodeEndpoints.Host", "string", "0+", "", "", -1),
        ("NodeEndpoints.Port", "int32", "0+", "", "", -1),
        ("NodeEndpoints.Rack", "string", "0+", "0+", "", -1),
    ]),
    "ShareGroupDescribeRequest": ("1", "0+", [
        ("GroupIds", "[]string", "0+", "", "", -1),
        ("IncludeAuthorizedOperations", "bool", "0+", "", "", -1),
    ]),
    "ShareGroupDescribeResponse": ("1", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("Groups", "[]DescribedGroup", "0+", "", "", -1),
        ("Groups.ErrorCode", "int16", "0+", "", "", -1),
        ("Groups.ErrorMessage", "string", "0+", "0+", "", -1),
        ("Groups.GroupId", "string", "0+", "", "", -1),
        ("Groups.GroupState", "string", "0+", "", "", -1),
        ("Groups.GroupEpoch", "int32", "0+", "", "", -1),
        ("Groups.AssignmentEpoch", "int32", "0+", "", "", -1),
        ("Groups.AssignorName", "string", "0+", "", "", -1),
        ("Groups.Members", "[]Member", "0+", "", "", -1),
        ("Groups.Members.MemberId", "string", "0+", "", "", -1),
        ("Groups.Members.RackId", "string", "0+", "0+", "", -1),
        ("Groups.Members.MemberEpoch", "int32", "0+", "", "", -1),
        ("Groups.Members.ClientId", "string", "0+", "", "", -1),
        ("Groups.Members.ClientHost", "string", "0+", "", "", -1),
        ("Groups.Members.SubscribedTopicNames", "[]string", "0+", "", "", -1),
        ("Groups.Members.Assignment", "Assignment", "0+", "", "", -1),
        ("Groups.Members.Assignment.TopicPartitions", "[]TopicPartitions", "0+", "", "", -1),
        ("Groups.Members.Assignment.TopicPartitions.TopicId", "uuid", "0+", "", "", -1),
        ("Groups.Members.Assignment.TopicPartitions.TopicName", "string", "0+", "", "", -1),
        ("Groups.Members.Assignment.TopicPartitions.Partitions", "[]int32", "0+", "", "", -1),
        ("Groups.AuthorizedOperations", "int32", "0+", "", "", -1),
    ]),
    "ShareGroupHeartbeatRequest": ("1", "0+", [
        ("GroupId", "string", "0+", "", "", -1),
        ("MemberId", "string", "0+", "", "", -1),
        ("MemberEpoch", "int32", "0+", "", "", -1),
        ("RackId", "string", "0+", "0+", "", -1),
        ("SubscribedTopicNames", "[]string", "0+", "0+", "", -1),
    ]),
    "ShareGroupHeartbeatResponse": ("1", "0+", [
        ("ThrottleTimeMs", "int32", "0+", "", "", -1),
        ("ErrorCode", "int16", "0+", "", "", -1),
        ("ErrorMessage", "string", "0+", "0+", "", -1),
        ("MemberId", "string", "0+", "0+", "", -1),
        ("MemberEpoch", "int32", "0+", "", "", -1),
        ("HeartbeatIntervalMs", "int32", "0+", "", "", -1),
        ("Assignment", "Assignment", "0+", "0+", "", -1),
        ("Assignment.TopicPartitions", "[]TopicPartitions", "0+", "", "", -1),
        ("Assignment.TopicPartitions.TopicId", "uuid", "0+", "", "", -1),
        ("Assignment.TopicPartitions.Partitions", "[]int32", "0+", "", "", -1),
    ]),
}


def shapes(fields: list[dict[str, Any]] | None, structs: dict[str, Any], prefix: str = "") -> list[Shape]:
    out: list[Shape] = []
    for f in fields or []:
        path = prefix + f["name"]
        out.append(
            (
                path,
                f["type"],
                f["versions"],
                f.get("nullableVersions", ""),
                f.get("taggedVersions", ""),
                f.get("tag", -1),
            )
        )
        inner = f.get("fields") or structs.get(f["type"].removeprefix("[]"))
        out += shapes(inner, structs, path + ".")
    return out


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_definition_has_the_released_shape(name: str) -> None:
    d = json.loads((MESSAGES / f"{name}.json").read_text())
    valid, flexible, fields = RELEASED[name]
    assert (d["validVersions"], d["flexibleVersions"]) == (valid, flexible)
    structs = {c["name"]: c["fields"] for c in d.get("commonStructs", [])}
    assert shapes(d["fields"], structs) == fields
