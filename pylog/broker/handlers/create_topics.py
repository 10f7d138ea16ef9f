"""CreateTopics: validated here, committed by the controller, logs opened when the records apply."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import NewTopic, Outcome, validate_topic_name
from pylog.broker.registry import handles
from pylog.config import ConfigError, validate_topic_configs


def check_new_topic(ctx: RequestContext, t: Any) -> tuple[NewTopic | None, Outcome]:
    """Kafka's CreateTopics validation for one topic; returns the spec or the error."""
    cfg = ctx.broker.config
    md = ctx.broker.metadata
    bad = validate_topic_name(t.name)
    if not bad.ok:
        return None, bad
    if md.topic(t.name) is not None:
        return None, Outcome(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    assignments = {a.partition_index: tuple(a.broker_ids) for a in (t.assignments or [])}
    if assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return None, Outcome(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        if sorted(assignments) != list(range(len(assignments))):
            return None, Outcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered from 0")
        known = {b.node_id for b in md.brokers()}
        for replicas in assignments.values():
            if not replicas or len(set(replicas)) != len(replicas) or not set(replicas) <= known:
                return None, Outcome(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment {replicas}"
                )
        partitions, rf = len(assignments), len(next(iter(assignments.values())))
    else:
        partitions = cfg.int("num.partitions") if t.num_partitions == -1 else t.num_partitions
        rf = cfg.int("default.replication.factor") if t.replication_factor == -1 else t.replication_factor
        if partitions <= 0:
            return None, Outcome(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        if rf <= 0:
            return None, Outcome(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        brokers = len(md.brokers())
        if rf > brokers:
            return None, Outcome(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): The target replication factor "
                f"of {rf} cannot be reached because only {brokers} broker(s) are registered.",
            )
    configs = {c.name: c.value for c in (t.configs or [])}
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        return None, Outcome(ErrorCode.INVALID_CONFIG, str(exc))
    if any(v is None for v in configs.values()):
        return None, Outcome(ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs")
    spec = NewTopic(t.name, partitions, rf, {k: str(v) for k, v in configs.items()}, assignments or None)
    return spec, Outcome()


@handles(ApiKey.CREATE_TOPICS, versions=(0, 7))
async def create_topics(ctx: RequestContext, req: Any) -> dict:
    validate_only = bool(getattr(req, "validate_only", False))
    names = [t.name for t in req.topics]
    dupes = {n for n in names if names.count(n) > 1}
    outcomes: dict[int, Outcome] = {}
    specs: list[tuple[int, NewTopic]] = []
    for i, t in enumerate(req.topics):
        if t.name in dupes:
            outcomes[i] = Outcome(
                ErrorCode.INVALID_REQUEST,
                f"Create topics request from client contains duplicate topic name {t.name!r}",
            )
            continue
        spec, outcome = check_new_topic(ctx, t)
        if spec is None:
            outcomes[i] = outcome
        else:
            specs.append((i, spec))
    if specs:
        results = await ctx.broker.metadata.create_topics([s for _, s in specs], validate_only=validate_only)
        for (i, _), outcome in zip(specs, results):
            outcomes[i] = outcome
    md = ctx.broker.metadata
    cfg = ctx.broker.config
    topics = []
    spec_by_index = dict(specs)
    for i, t in enumerate(req.topics):
        outcome = outcomes[i]
        entry: dict[str, Any] = {
            "name": t.name,
            "error_code": outcome.error,
            "error_message": outcome.message,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": None,
        }
        spec = spec_by_index.get(i)
        if outcome.ok and spec is not None:
            info = md.topic(t.name)
            if info is not None:
                entry["topic_id"] = info.topic_id
            entry["num_partitions"] = spec.num_partitions
            entry["replication_factor"] = spec.replication_factor
            entry["configs"] = [
                {
                    "name": r.name,
                    "value": r.value,
                    "read_only": r.read_only,
                    "config_source": int(r.source),
                    "is_sensitive": False,
                }
                for r in cfg.describe_topic(spec.configs)
            ]
        topics.append(entry)
    return {"throttle_time_ms": 0, "topics": topics}
