"""The Prometheus families of one node, built at scrape time from what the node already keeps.

Runs on the metrics server's thread, not the event loop: it copies the dicts it walks
(``list(d.items())`` copies under the GIL in one step) and takes no lock but the replica
manager's, for one list copy. Names follow what Kafka's JMX exporter rules produce from Kafka's
MBeans (``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t`` ->
``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``), so dashboards built for Kafka
keep working; what Kafka has no MBean for is ``pylog_...``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from pylog.metrics.counters import (
    FETCH,
    FETCH_CONSUMER,
    FETCH_FOLLOWER,
    PRODUCE,
    TIME_BUCKETS_MS,
    RequestStats,
    TimeHistogram,
    TopicStats,
)
from pylog.metrics.leader_offsets import LeaderOffsets
from pylog.metrics.loop_lag import LoopLag
from pylog.protocol.api import ApiKey, PylogApiKey
from pylog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pylog.metrics.observed import ObservedNode

log = logging.getLogger(__name__)

MAX_LABEL_CHARS = 512
"""Longer label values (group ids may be long) are cut, with a hash to keep them apart."""

MAX_PARTITION_SERIES = 100_000
"""Per-partition families stop after this many partitions (``pylog_metrics_partitions_omitted``)."""

MAX_CLIENT_SAMPLES = 20_000
"""Samples re-exported from what clients pushed (KIP-714), at most, per scrape."""

CLIENT_LABELS = ("client_instance_id", "client_id", "client_software_name", "client_software_version")

Family = Any  # a prometheus_client Metric

_LEADER_DOC = "The metadata quorum's leader (-1: none)."
_LE = [str(b) for b in TIME_BUCKETS_MS] + ["+Inf"]
_LE_SECONDS = [str(b / 1000) for b in TIME_BUCKETS_MS] + ["+Inf"]
_API_NAMES = {int(k): "".join(w.capitalize() for w in k.name.split("_")) for k in ApiKey} | {
    int(k): "Pylog" + "".join(w.capitalize() for w in k.name.split("_")) for k in PylogApiKey
} | {FETCH_CONSUMER: "FetchConsumer", FETCH_FOLLOWER: "FetchFollower"}
_ERRORS_AS = {FETCH_CONSUMER: "Fetch", FETCH_FOLLOWER: "Fetch"}  # Kafka's ErrorsPerSec says Fetch


def label(value: object) -> str:
    """A label value that always encodes: text kept as is (the exposition escapes quotes, \\ and
    newlines), lone surrogates escaped, very long values cut and tagged with their hash."""
    s = value if isinstance(value, str) else str(value)
    if not s.isascii():
        s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(s) > MAX_LABEL_CHARS:
        s = f"{s[:MAX_LABEL_CHARS - 17]}~{hash(s) & 0xFFFFFFFFFFFFFFFF:016x}"
    return s


def api_name(api_key: int) -> str:
    """Kafka's request name (``ApiKeys.name``): Produce, Fetch, ListOffsets, ...; pylog's own
    requests as PylogRaft, PylogMetadataFetch, ..."""
    return _API_NAMES.get(api_key, str(api_key))


def _copy(items: Callable[[], Any]) -> list[Any]:
    """``list(items())``, again if the event loop changed the dict in between."""
    for _ in range(5):
        try:
            return list(items())
        except (RuntimeError, KeyError):  # changed size during iteration, or removed meanwhile
            continue
    return []


class BrokerCollector(Collector):
    """Every family of a node (broker, controller or both)."""

    def __init__(
        self,
        broker: ObservedNode,
        loop_lag: LoopLag | None = None,
        leader_offsets: LeaderOffsets | None = None,
    ) -> None:
        self.broker = broker
        self.loop_lag = loop_lag
        self.leader_offsets = leader_offsets
        self.collect_errors = 0
        # this scrape's partitions led elsewhere, by who wants their high watermark (a scrape per thread)
        self._scrape = threading.local()

    def collect(self) -> Iterator[Family]:
        self._scrape.wanted = {}
        for part in (
            self._node,
            self._requests,
            self._topics,
            self._replicas,
            self._replication_quotas,
            self._logs,
            self._controller,
            self._raft,
            self._groups,
            self._group_states,
            self._share_partitions,
            self._transactions,
            self._follower_lag,
            self._tiered,
            self._schema_registry,
            self._iceberg,
            self._connections,
            self._quotas,
            self._loop,
            self._client_metrics,
        ):
            try:
                yield from part()
            except Exception:  # one broken part must not cost the scrape the others
                self.collect_errors += 1
                log.exception("metrics: collecting %s failed", part.__name__)
        errors = CounterMetricFamily(
            "pylog_metrics_collect_errors", "Parts of a scrape that failed (see the broker log)."
        )
        errors.add_metric([], self.collect_errors)
        yield errors

    def _node(self) -> Iterator[Family]:
        b = self.broker
        info = GaugeMetricFamily("pylog_node_info", "1, labelled with the node's id, roles and cluster id.",
                                 labels=["node_id", "roles", "cluster_id"])
        info.add_metric([str(b.node_id), ",".join(sorted(b.settings.roles)), label(b.cluster_id)], 1)
        yield info

    # --- requests ---------------------------------------------------------------------------

    def _request_stats(self) -> list[RequestStats]:
        b = self.broker
        servers = list(b.servers) + ([b.controller_server] if b.controller_server is not None else [])
        return [s.request_stats for s in servers]

    def _requests(self) -> Iterator[Family]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered, by request and version.",
            labels=["request", "version"],
        )
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Answers carrying a top-level error code (or failed handlers), by request and error.",
            labels=["request", "error"],
        )
        times = {
            "total": HistogramMetricFamily(
                "kafka_network_requestmetrics_totaltimems",
                "Milliseconds from the read that brought a request to its answer sent (request queue "
                "+ local + remote + response queue + response send).", labels=["request"],
            ),
            "local": HistogramMetricFamily(
                "kafka_network_requestmetrics_localtimems",
                "Milliseconds the handler ran on the event loop.", labels=["request"],
            ),
            "remote": HistogramMetricFamily(
                "kafka_network_requestmetrics_remotetimems",
                "Milliseconds the answer waited for others (replicas for acks=all, long polls, "
                "the controller).", labels=["request"],
            ),
            "queue": HistogramMetricFamily(
                "kafka_network_requestmetrics_requestqueuetimems",
                "Milliseconds from the read that brought a request to its dispatch (requests "
                "before it in the same read, a throttle that held it).", labels=["request"],
            ),
            "throttle": HistogramMetricFamily(
                "kafka_network_requestmetrics_throttletimems",
                "Milliseconds a client quota throttled the answer (0 for most requests).",
                labels=["request"],
            ),
            "response_queue": HistogramMetricFamily(
                "kafka_network_requestmetrics_responsequeuetimems",
                "Milliseconds from the encoded answer to its write to the connection (answers owed "
                "before it on the connection, the rest of the read being served).", labels=["request"],
            ),
            "response_send": HistogramMetricFamily(
                "kafka_network_requestmetrics_responsesendtimems",
                "Milliseconds from the write of the answer until the connection's buffer has drained "
                "(a client reading slowly).", labels=["request"],
            ),
        }
        partition_errors = CounterMetricFamily(
            "pylog_partition_errors",
            "Partitions of Produce and Fetch answers that carried an error, by request, topic, "
            "partition and error (topic \"\" and partition -1: beyond the counters kept).",
            labels=["request", "topic", "partition", "error"],
        )
        merged: dict[int, tuple[dict[int, int], dict[int, int], dict[str, list[int]], dict[str, int]]] = {}
        image = self._image()
        known = set(_copy(image.topics.keys)) if image is not None else None
        per_partition: dict[tuple[int, str, int, int], int] = {}
        for stats in self._request_stats():
            if known is not None:
                stats.forget(known)
            for pkey, n in _copy(stats.partition_errors.items):
                per_partition[pkey] = per_partition.get(pkey, 0) + n
            for key, api in _copy(stats.apis.items):
                versions, errs, buckets, sums = merged.setdefault(key, ({}, {}, {}, {}))
                for v, n in _copy(api.by_version.items):
                    versions[v] = versions.get(v, 0) + n
                for code, n in _copy(api.errors.items):
                    errs[code] = errs.get(code, 0) + n
                hist: TimeHistogram
                for kind, hist in (
                    ("total", api.total), ("local", api.local), ("remote", api.remote),
                    ("queue", api.queue), ("throttle", api.throttle),
                    ("response_queue", api.response_queue), ("response_send", api.response_send),
                ):
                    got = list(hist.buckets)
                    if hist is api.throttle:  # every request not throttled is a 0 ms observation
                        got[0] += max(sum(api.total.buckets) - sum(got), 0)
                    acc = buckets.setdefault(kind, [0] * len(got))
                    for i, n in enumerate(got):
                        acc[i] += n
                    sums[kind] = sums.get(kind, 0) + hist.sum_ns
        error_counts: dict[tuple[str, str], int] = {}
        for key, (versions, errs, buckets, sums) in sorted(merged.items()):
            name = api_name(key)
            for v, n in sorted(versions.items()):
                requests.add_metric([name, str(v)], n)
            for code, n in errs.items():
                at = (_ERRORS_AS.get(key, name), _error_name(code))
                error_counts[at] = error_counts.get(at, 0) + n
            for kind, fam in times.items():
                counts = buckets.get(kind)
                if counts is None:
                    continue
                cumulative, running = [], 0
                for le, n in zip(_LE, counts):
                    running += n
                    cumulative.append((le, running))
                fam.add_metric([name], cumulative, sums[kind] / 1e6)
        for (name, error), n in sorted(error_counts.items()):
            errors.add_metric([name, error], n)
        failed: dict[int, dict[str, int]] = {PRODUCE: {}, FETCH: {}}
        for (key, topic, index, code), n in sorted(per_partition.items()):
            partition_errors.add_metric([api_name(key), label(topic), str(index), _error_name(code)], n)
            by_topic = failed[key]
            by_topic[topic] = by_topic.get(topic, 0) + n
        yield requests
        yield errors
        yield partition_errors
        for key, name in ((PRODUCE, "failedproducerequests"), (FETCH, "failedfetchrequests")):
            failures = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}",
                f"Partitions of {api_name(key)} requests answered with an error, by topic; without "
                "topic: all topics.", labels=["topic"],
            )
            for topic, n in sorted(failed[key].items()):
                failures.add_metric([label(topic)], n)
            failures.samples.append(Sample(failures.name + "_total", {}, sum(failed[key].values())))
            yield failures
        yield from times.values()

    # --- topics -----------------------------------------------------------------------------

    def _topics(self) -> Iterator[Family]:
        stats: TopicStats = self.broker.replicas.topic_stats
        image = self._image()
        if image is not None:
            stats.forget(set(_copy(image.topics.keys)))
        hosted = self.broker.replicas.topics()  # their series start at 0, so a first burst has a rate
        for attr, name, doc in (
            ("messages_in", "messagesin", "Records appended to partitions this broker leads."),
            ("bytes_in", "bytesin", "Bytes of record batches appended to partitions this broker leads."),
            ("bytes_out", "bytesout", "Record bytes sent to consumers."),
            ("replication_bytes_out", "replicationbytesout", "Record bytes sent to follower replicas."),
            ("replication_bytes_in", "replicationbytesin", "Record bytes appended as a follower."),
        ):
            per_topic = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}", doc + " By topic; without topic: all topics.",
                labels=["topic"],
            )
            total = 0
            counts = dict(_copy(getattr(stats, attr).items))
            for topic in hosted:
                counts.setdefault(topic, 0)
            for topic, n in sorted(counts.items()):
                per_topic.add_metric([label(topic)], n)
                total += n
            per_topic.samples.append(Sample(per_topic.name + "_total", {}, total))
            yield per_topic
        moved = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_reassignmentbytesout",
            "Record bytes sent to replicas a reassignment is adding (of replicationbytesout).",
        )
        moved.add_metric([], stats.reassignment_bytes_out)
        yield moved
        arrived = CounterMetricFamily(
            "kafka_server_brokertopicmetrics_reassignmentbytesin",
            "Record bytes appended as a replica a reassignment is adding (of replicationbytesin).",
        )
        arrived.add_metric([], stats.reassignment_bytes_in)
        yield arrived

    # --- partitions this broker hosts ---------------------------------------------------------

    def _replicas(self) -> Iterator[Family]:
        b = self.broker
        parts = b.replicas.snapshot()
        node = b.node_id
        leaders = under = under_min = at_min = offline = 0
        for p in parts:
            if p.role.value == "offline":
                offline += 1
            if p.leader_id != node or p.role.value != "leader":
                continue
            leaders += 1
            isr = len(p.isr)
            if isr < len(p.replicas):
                under += 1
            if isr < p.min_insync_replicas:
                under_min += 1
            elif isr == p.min_insync_replicas:
                at_min += 1
        for name, value, doc in (
            ("partitioncount", len(parts), "Partition replicas on this broker."),
            ("leadercount", leaders, "Partitions this broker leads."),
            ("underreplicatedpartitions", under, "Partitions led here whose ISR lacks a replica."),
            ("underminisrpartitioncount", under_min, "Partitions led here with fewer in sync than "
             "min.insync.replicas (acks=all produces fail)."),
            ("atminisrpartitioncount", at_min,
             "Partitions led here with exactly min.insync.replicas in sync."),
            ("offlinereplicacount", offline, "Replicas here without a leader."),
        ):
            fam = GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc)
            fam.add_metric([], value)
            yield fam
        manager = b.isr
        for name, value, doc in (
            ("isrshrinks", manager.shrinks if manager is not None else 0, "ISR shrinks the controller "
             "accepted for partitions led here."),
            ("isrexpands", manager.expands if manager is not None else 0, "ISR expansions the controller "
             "accepted for partitions led here."),
        ):
            counter = CounterMetricFamily(f"kafka_server_replicamanager_{name}", doc)
            counter.add_metric([], value)
            yield counter

    def _replication_quotas(self) -> Iterator[Family]:
        """The replication throttles (KIP-73): the byte rate each measures, as Kafka's
        ``kafka.server:type=LeaderReplication`` / ``FollowerReplication`` ``byte-rate``, and the
        throttled bytes moved since the start. Read only: the quotas' windows are measured on a copy."""
        replicas = self.broker.replicas
        now_ms = self.broker.clock.monotonic_ms()
        total = CounterMetricFamily(
            "pylog_replication_throttled_bytes",
            "Bytes of throttled replicas moved, by quota: LeaderReplication (returned to followers "
            "by this leader), FollowerReplication (taken by this broker's replica fetchers).",
            labels=["quota"],
        )
        for name, quota, side in (("LeaderReplication", replicas.leader_quota, "leader"),
                                  ("FollowerReplication", replicas.follower_quota, "follower")):
            rate = GaugeMetricFamily(
                f"kafka_server_{name.lower()}_byte_rate",
                f"Throttled replication bytes/s the {name} quota measures (what "
                f"{side}.replication.throttled.rate bounds).",
            )
            rate.add_metric([], quota.byte_rate(now_ms))
            yield rate
            total.add_metric([name], quota.bytes_total)
        yield total

    def _logs(self) -> Iterator[Family]:
        parts = self.broker.replicas.snapshot()
        labels = ["topic", "partition"]
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Next offset of the local log.", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "First offset of the log.", labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the local log's segments.", labels=labels)
        segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "Local segments.", labels=labels)
        hw = GaugeMetricFamily("pylog_log_highwatermark", "High watermark of the replica.", labels=labels)
        omitted = max(0, len(parts) - MAX_PARTITION_SERIES)
        for p in parts[:MAX_PARTITION_SERIES]:
            if p.deleted:
                continue
            lv = [label(p.topic), str(p.index)]
            lg = p.log
            end.add_metric(lv, lg.log_end_offset)
            start.add_metric(lv, lg.log_start_offset)
            size.add_metric(lv, lg.size_bytes)
            segs.add_metric(lv, lg.segment_count)
            hw.add_metric(lv, p.high_watermark)
        yield from (end, start, size, segs, hw)
        fam = GaugeMetricFamily(
            "pylog_metrics_partitions_omitted",
            f"Partitions left out of the per-partition families (more than {MAX_PARTITION_SERIES}).",
        )
        fam.add_metric([], omitted)
        yield fam

    # --- controller and metadata ---------------------------------------------------------------

    def _image(self) -> Any:
        b = self.broker
        source = b.metadata or b.quorum
        return source.image if source is not None else None

    def _controller(self) -> Iterator[Family]:
        quorum = self.broker.quorum
        if quorum is None:  # a broker-only node: no controller MBeans, as with Kafka
            return
        active = 1 if quorum.is_leader else 0
        image = quorum.image
        offline = partitions = 0
        topics = _copy(image.topics.values)
        for t in topics:
            for p in _copy(functools.partial(_partitions_of, image, t.topic_id)):
                partitions += 1
                if p.leader < 0:
                    offline += 1
        brokers = _copy(image.brokers.values)
        fenced = sum(1 for r in brokers if r.fenced)
        for name, value, doc in (
            ("activecontrollercount", active, "1 on the active controller (the metadata quorum's leader)."),
            ("offlinepartitionscount", offline,
             "Partitions without a leader (as this controller's image says)."),
            ("fencedbrokercount", fenced, "Registered brokers that are fenced."),
            ("activebrokercount", len(brokers) - fenced, "Registered brokers that are unfenced."),
            ("globaltopiccount", len(topics), "Topics in the cluster."),
            ("globalpartitioncount", partitions, "Partitions in the cluster."),
        ):
            fam = GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", doc)
            fam.add_metric([], value)
            yield fam

    def _raft(self) -> Iterator[Family]:
        b = self.broker
        quorum, observer = b.quorum, b.observer
        values: dict[str, tuple[float, str]] = {}
        if quorum is not None:
            leader = quorum.leader_id
            values["current_leader"] = (-1 if leader is None else leader, _LEADER_DOC)
            values["current_epoch"] = (quorum.term, "The quorum's epoch (Raft term).")
            values["high_watermark"] = (quorum.committed_offset, "The metadata log's committed offset.")
            values["log_end_offset"] = (quorum.log_end_offset, "The last offset of this node's metadata log.")
            yield from self._voters(quorum)
        elif observer is not None:
            leader = observer.leader_id
            values["current_leader"] = (-1 if leader is None else leader, _LEADER_DOC)
        for name, (value, doc) in values.items():
            fam = GaugeMetricFamily(f"kafka_server_raftmetrics_{name}", doc)
            fam.add_metric([], value)
            yield fam
        image = self._image()
        if image is not None:
            fam = GaugeMetricFamily(
                "kafka_server_broker_metadata_metrics_last_applied_record_offset",
                "Offset of the last metadata record this node applied.",
            )
            fam.add_metric([], image.offset)
            yield fam

    def _voters(self, quorum: Any) -> Iterator[Family]:
        """The active controller's view of each voter's and observer's metadata log end."""
        progress = dict(quorum.voter_progress())
        if not progress:
            return
        committed = quorum.committed_offset
        end = GaugeMetricFamily("pylog_raft_voter_log_end_offset",
                                "Each voter's metadata log end, as the active controller knows it.",
                                labels=["voter"])
        lag = GaugeMetricFamily("pylog_raft_voter_commit_lag",
                                "Committed metadata records a voter does not have yet (active controller).",
                                labels=["voter"])
        for voter, offset in sorted(progress.items()):
            end.add_metric([str(voter)], offset)
            lag.add_metric([str(voter)], max(committed - offset, 0))
        observed = GaugeMetricFamily(
            "pylog_raft_observer_log_end_offset",
            "How far each broker (observer) has fetched the metadata log, as the active controller knows it.",
            labels=["node"],
        )
        for node, (_, offset, _) in sorted(dict(quorum.observers()).items()):
            observed.add_metric([str(node)], offset)
        yield from (end, lag, observed)

    # --- groups -------------------------------------------------------------------------------

    def _leader_high_watermarks(self, who: str, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """High watermarks of ``wanted``, led elsewhere, as `LeaderOffsets` last heard them. One
        set is asked per scrape (a round forgets what it was not asked): what the parts of this
        scrape wanted so far, and the Iceberg tables' partitions, known beforehand."""
        if self.leader_offsets is None:
            return {}
        asked: dict[str, set[tuple[str, int]]] = getattr(self._scrape, "wanted", {})
        asked[who] = wanted
        if "iceberg" not in asked:
            asked["iceberg"] = self._iceberg_partitions()[1]
        union = set().union(*asked.values())
        return {tp: hw for tp, hw in self.leader_offsets.high_watermarks(union).items() if tp in wanted}

    def _groups(self) -> Iterator[Family]:
        """Lag of the groups this broker coordinates: the partition's high watermark minus the
        committed offset. The high watermark of a partition led here is its replica's; of one led
        elsewhere, what its leader answers (`LeaderOffsets`), else this node's follower replica's;
        a partition with none of these has its committed offset but no lag."""
        groups = self.broker.groups
        if groups is None or groups.coordinator is None:
            return
        offsets = groups.coordinator.offsets
        labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "Records a group has not committed yet.",
                                labels=labels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "A group's committed offset.",
                                    labels=labels)
        total = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag over its partitions.",
                                  labels=["group"])
        replicas = self.broker.replicas
        node = self.broker.node_id
        by_group = [(g, _copy(offsets.of(g).items)) for g in sorted(_copy(offsets.group_ids))]
        local: dict[tuple[str, int], Any] = {}
        elsewhere: set[tuple[str, int]] = set()
        for _, committed in by_group:
            for tp, _ in committed:
                if tp in local or tp in elsewhere:
                    continue
                part = replicas.get(*tp)
                if part is not None and part.leader_id == node and part.role.value == "leader":
                    local[tp] = part.high_watermark
                else:
                    elsewhere.add(tp)
                    if part is not None:
                        local[tp] = part.high_watermark  # a follower's, if its leader does not answer
        local.update(self._leader_high_watermarks("groups", elsewhere))
        for group_id, committed in by_group:
            g = label(group_id)
            sum_lag = 0
            for (topic, index), om in committed:
                lv = [g, label(topic), str(index)]
                current.add_metric(lv, om.offset)
                hw = local.get((topic, index))
                if hw is None:
                    continue
                value = max(hw - om.offset, 0)
                sum_lag += value
                lag.add_metric(lv, value)
            total.add_metric([g], sum_lag)
        yield from (lag, current, total)

    def _group_states(self) -> Iterator[Family]:
        """Every group this broker coordinates: its type, state, members and generation (a classic
        group's generation, a consumer or share group's epoch: its increase counts rebalances)."""
        shell = self.broker.groups
        if shell is None or shell.coordinator is None:
            return
        from pylog.groups.describe import listed

        labels = ["group", "type"]
        members = GaugeMetricFamily("pylog_group_members", "Members of a group.", labels=labels)
        generation = GaugeMetricFamily(
            "pylog_group_generation",
            "A classic group's generation or a consumer / share group's epoch (each rebalance adds one).",
            labels=labels,
        )
        state = GaugeMetricFamily("pylog_group_state", "1 for the state a group is in.",
                                  labels=[*labels, "state"])
        counts: dict[tuple[str, str], int] = {}
        for g in _copy(shell.coordinator.registry.groups.values):
            entry = listed(g)
            lv = [label(entry.group_id), entry.group_type]
            members.add_metric(lv, len(g.members))
            generation.add_metric(lv, getattr(g, "generation_id", None) or getattr(g, "group_epoch", 0) or 0)
            state.add_metric([*lv, entry.group_state], 1)
            at = (entry.group_type, entry.group_state)
            counts[at] = counts.get(at, 0) + 1
        count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                                  "Groups coordinated here, by protocol (type) and state.",
                                  labels=["protocol", "state"])
        for (kind, st), n in sorted(counts.items()):
            count.add_metric([kind, st], n)
        yield from (members, generation, state, count)

    def _share_partitions(self) -> Iterator[Family]:
        """Share groups' records in flight and acquired, by group and the partitions led here."""
        shell = self.broker.share_state
        manager = shell.manager if shell is not None else None
        image = self._image()
        if manager is None or image is None:
            return
        labels = ["group", "topic", "partition"]
        in_flight = GaugeMetricFamily("pylog_share_partition_in_flight",
                                      "Records between a share partition's start and end offsets.",
                                      labels=labels)
        acquired = GaugeMetricFamily("pylog_share_partition_acquired",
                                     "Records a share group's consumers hold acquired.", labels=labels)
        names = {tid: t.name for tid, t in _copy(image.topics_by_id.items)}
        for (group, topic_id, index), sp in _copy(manager.partitions.items)[:MAX_PARTITION_SERIES]:
            lv = [label(group), label(names.get(topic_id, str(topic_id))), str(index)]
            in_flight.add_metric(lv, sp.in_flight_count())
            acquired.add_metric(lv, sp.acquired_count())
        yield from (in_flight, acquired)

    def _transactions(self) -> Iterator[Family]:
        """Transactional ids this broker coordinates, by state, and markers not yet written."""
        shell = self.broker.txn
        coordinator = shell.coordinator if shell is not None else None
        if coordinator is None:
            return
        by_state: dict[str, int] = {}
        pending = 0
        for tid in coordinator.transactional_ids():
            md = coordinator.transaction(tid)
            if md is None:
                continue
            name = md.state.kafka_name
            by_state[name] = by_state.get(name, 0) + 1
            pending += len(md.pending_markers)
        fam = GaugeMetricFamily("pylog_transactions", "Transactional ids coordinated here, by state.",
                                labels=["state"])
        for name, n in sorted(by_state.items()):
            fam.add_metric([name], n)
        markers = GaugeMetricFamily("pylog_transaction_pending_markers",
                                    "Partitions of completing transactions whose marker is not written yet.")
        markers.add_metric([], pending)
        yield from (fam, markers)

    def _follower_lag(self) -> Iterator[Family]:
        """For partitions led here: how many records each follower's log lacks."""
        lag = GaugeMetricFamily("pylog_replica_follower_lag",
                                "The leader's log end minus a follower's (as its last fetch said).",
                                labels=["topic", "partition", "replica"])
        node = self.broker.node_id
        for p in self.broker.replicas.snapshot()[:MAX_PARTITION_SERIES]:
            state = p.leader_state
            if state is None or p.leader_id != node or p.deleted:
                continue
            end = p.log.log_end_offset
            topic = label(p.topic)
            for replica, f in _copy(state.followers.items):
                lag.add_metric([topic, str(p.index), str(replica)], max(end - f.log_end_offset, 0)
                               if f.log_end_offset >= 0 else end)
        yield lag

    def _tiered(self) -> Iterator[Family]:
        """Remote (tiered) storage of the partitions led here: bytes and segments remote, sealed
        local data not yet copied (Kafka's RemoteLogSizeBytes, RemoteCopyLagBytes / Segments)."""
        manager = self.broker.remote_log
        image = self._image()
        if manager is None or image is None:
            return
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_server_brokertopicmetrics_remotelogsizebytes",
                                 "Bytes of a partition's remote segments.", labels=labels)
        count = GaugeMetricFamily("kafka_server_brokertopicmetrics_remotelogmetadatacount",
                                  "Remote segments of a partition.", labels=labels)
        lag_bytes = GaugeMetricFamily("kafka_server_brokertopicmetrics_remotecopylagbytes",
                                      "Bytes of sealed local segments not copied to remote storage yet.",
                                      labels=labels)
        lag_segments = GaugeMetricFamily("kafka_server_brokertopicmetrics_remotecopylagsegments",
                                         "Sealed local segments not copied to remote storage yet.",
                                         labels=labels)
        for (topic, index), (segments, nbytes) in sorted(manager.upload_lag().items())[:MAX_PARTITION_SERIES]:
            lv = [label(topic), str(index)]
            lag_bytes.add_metric(lv, nbytes)
            lag_segments.add_metric(lv, segments)
            t = image.topics.get(topic)
            remote = image.remote_segments(topic, t.topic_id, index) if t is not None else ()
            size.add_metric(lv, sum(seg.size_bytes for seg in remote))
            count.add_metric(lv, len(remote))
        copied = CounterMetricFamily("kafka_server_brokertopicmetrics_remotecopybytes",
                                     "Bytes copied to remote storage.")
        copied.add_metric([], manager.stats()["bytes_uploaded"])
        yield from (size, count, lag_bytes, lag_segments, copied)

    def _schema_registry(self) -> Iterator[Family]:
        """What this node's schema registry answered, by route pattern, method and status, and how
        long it took."""
        server = self.broker.schema_registry
        if server is None:
            return
        stats = server.requests
        count = CounterMetricFamily(
            "pylog_schema_registry_requests",
            "Schema registry HTTP requests answered, by route pattern, method and status.",
            labels=["route", "method", "status"],
        )
        for (route, method, status), n in sorted(_copy(stats.answered.items)):
            count.add_metric([route, method, str(status)], n)
        times = HistogramMetricFamily(
            "pylog_schema_registry_request_duration_seconds",
            "Seconds from a schema registry request's dispatch to its answer, by route pattern and method.",
            labels=["route", "method"],
        )
        for (route, method), hist in sorted(_copy(stats.times.items)):
            cumulative, running = [], 0
            for le, n in zip(_LE_SECONDS, list(hist.buckets)):
                running += n
                cumulative.append((le, running))
            times.add_metric([route, method], cumulative, hist.sum_ns / 1e9)
        yield from (count, times)

    def _iceberg(self) -> Iterator[Family]:
        """Iceberg tables materialised here: records each partition's table lacks below the high
        watermark (the high watermark of a partition led elsewhere is asked of its leader, as for
        group lag; without one the partition has no value)."""
        offsets = self.broker.iceberg.table_offsets()
        if not offsets:
            return
        hws, elsewhere = self._iceberg_partitions(offsets)
        hws.update(self._leader_high_watermarks("iceberg", elsewhere))
        lag = GaugeMetricFamily(
            "pylog_iceberg_materialization_lag",
            "Records of a partition below its high watermark that its Iceberg table does not hold yet.",
            labels=["topic", "partition"],
        )
        for topic, committed in sorted(offsets.items()):
            for index, offset in sorted(committed.items()):
                hw = hws.get((topic, index))
                if hw is not None:
                    lag.add_metric([label(topic), str(index)], max(hw - offset, 0))
        yield lag

    def _iceberg_partitions(
        self, offsets: dict[str, dict[int, int]] | None = None
    ) -> tuple[dict[tuple[str, int], int], set[tuple[str, int]]]:
        """The partitions of the tables materialised here: high watermarks of those led here, and
        those led elsewhere."""
        if offsets is None:
            offsets = self.broker.iceberg.table_offsets()
        replicas, node = self.broker.replicas, self.broker.node_id
        hws: dict[tuple[str, int], int] = {}
        elsewhere: set[tuple[str, int]] = set()
        for topic, committed in offsets.items():
            for index in committed:
                part = replicas.get(topic, index)
                if part is not None and part.leader_id == node and part.role.value == "leader":
                    hws[(topic, index)] = part.high_watermark
                else:
                    elsewhere.add((topic, index))
        return hws, elsewhere

    # --- connections, event loop -------------------------------------------------------------

    def _connections(self) -> Iterator[Family]:
        b = self.broker
        servers = list(b.servers) + ([b.controller_server] if b.controller_server is not None else [])
        count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                  "Open connections, by listener.", labels=["listener"])
        failed = CounterMetricFamily("kafka_server_socket_server_metrics_failed_authentication",
                                     "Failed authentications, by listener.", labels=["listener"])
        ok = CounterMetricFamily("kafka_server_socket_server_metrics_successful_authentication",
                                 "Successful SASL authentications, by listener.", labels=["listener"])
        by_mechanism = GaugeMetricFamily(
            "pylog_connections", "Open connections, by listener, security protocol and SASL mechanism "
            "(empty: none, or not authenticated yet).", labels=["listener", "security_protocol", "mechanism"])
        for s in servers:
            name = label(s.listener)
            conns = _copy(s.connections.copy)
            count.add_metric([name], len(conns))
            failed.add_metric([name], s.listener_stats.failed_authentications)
            ok.add_metric([name], s.listener_stats.successful_authentications)
            mechanisms: dict[str, int] = {}
            for c in conns:
                sasl = c.sasl
                mechanism = sasl.mechanism or "" if sasl is not None and sasl.authenticated else ""
                mechanisms[mechanism] = mechanisms.get(mechanism, 0) + 1
            for mechanism, n in sorted(mechanisms.items()):
                by_mechanism.add_metric([name, str(s.security.protocol), mechanism], n)
        yield from (count, failed, ok, by_mechanism)

    def _quotas(self) -> Iterator[Family]:
        """Throttles client quotas imposed, by client id and user (KIP-219 throttle times)."""
        labels = ["request", "user", "client_id"]
        total = CounterMetricFamily("pylog_client_throttle_time_ms",
                                    "Milliseconds of throttle answered to a client, by request, user and "
                                    "client id.", labels=labels)
        count = CounterMetricFamily("pylog_client_throttled", "Answers a quota throttled.", labels=labels)
        merged: dict[tuple[int, str, str], list[int]] = {}
        for stats in self._request_stats():
            for key, (n, ms) in _copy(stats.throttled_clients.items):
                acc = merged.setdefault(key, [0, 0])
                acc[0] += n
                acc[1] += ms
        for (api_key, user, client_id), (n, ms) in sorted(merged.items()):
            lv = [api_name(api_key), label(user), label(client_id)]
            count.add_metric(lv, n)
            total.add_metric(lv, ms)
        yield from (total, count)

    def _loop(self) -> Iterator[Family]:
        lag = self.loop_lag
        if lag is None:
            return
        last = GaugeMetricFamily("pylog_eventloop_lag_last_seconds",
                                 "How late the event loop ran the latest lag probe.")
        last.add_metric([], lag.last_s)
        yield last
        hist = HistogramMetricFamily("pylog_eventloop_lag_seconds",
                                     "How late the event loop ran its lag probes.")
        cumulative, running = [], 0
        for le, n in zip([*map(str, lag.bounds_s), "+Inf"], list(lag.buckets)):
            running += n
            cumulative.append((le, running))
        hist.add_metric([], cumulative, lag.sum_s)
        yield hist


    def _client_metrics(self) -> Iterator[Family]:
        """What KIP-714 clients last pushed here, as gauges named after their metric, labelled with
        the client (instance id, client id, software) and the data point's attributes. Needs the
        ``notebook`` extra's opentelemetry-proto; without it, nothing."""
        telemetry = self.broker.telemetry
        if telemetry is None:
            return
        instances = _copy(telemetry.manager._instances.items)
        if not any(inst.metrics for _, inst in instances):
            return
        try:
            from pylog.telemetry.otlp import decode_metrics
        except ImportError:
            return
        families: dict[str, Metric] = {}
        count = 0
        for instance_id, inst in instances:
            if not inst.metrics or count >= MAX_CLIENT_SAMPLES:
                continue
            try:
                points = decode_metrics(inst.metrics)
            except Exception:  # what one client pushed must not cost the others theirs
                continue
            who = inst.identity
            client = dict(zip(CLIENT_LABELS, (str(instance_id), who.client_id, who.client_software_name,
                                              who.client_software_version)))
            for point in points:
                name = _metric_name(point["metric"])
                fam = families.get(name)
                if fam is None:
                    fam = families[name] = Metric(name, f"Pushed by clients (KIP-714): {point['metric']}",
                                                  "gauge")
                labels = {_label_name(k): label(v) for k, v in point["attributes"]}
                labels.update((k, label(v or "")) for k, v in client.items())
                fam.add_sample(name, labels, float(point["value"]))
                if point.get("count") is not None:
                    fam.add_sample(name + "_count", labels, float(point["count"]))
                count += 1
        yield from families.values()

_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def _metric_name(name: str) -> str:
    """An OpenTelemetry metric name (``org.apache.kafka.producer.record.queue.time.avg``) as a
    Prometheus one (``org_apache_kafka_producer_record_queue_time_avg``)."""
    out = _NAME_CHARS.sub("_", name)
    return out if out[:1].isalpha() else f"_{out}"


def _partitions_of(image: Any, topic_id: Any) -> Any:
    return image.partitions(topic_id).values()


def _label_name(key: str) -> str:
    out = _NAME_CHARS.sub("_", key)
    return out if out[:1].isalpha() and not out.startswith("__") else f"a_{out}"


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
