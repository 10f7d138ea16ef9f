"""Running partition moves against a live cluster: submit a plan (AlterPartitionReassignments),
throttle it with Kafka's replication-throttle configs, follow it until done, then spread
leadership (preferred-leader election); remove a broker (move everything off, wait for it to stop,
UnregisterBroker); read and write Kafka's reassignment JSON (``kafka-reassign-partitions``).

The decisions (which replicas go where) are `pylog.cluster.rebalance_plan`'s; this is the shell.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from pylog.admin.common import AdminError
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster.rebalance_plan import Plan, PlanError, plan
from pylog.protocol.errors import ErrorCode
from pylog.sdk.cluster_admin import BROKER_RESOURCE, TOPIC_RESOURCE, ClusterAdminSync, ClusterState

TopicPartition = tuple[str, int]
Targets = dict[TopicPartition, tuple[int, ...]]
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS, FOLLOWER_REPLICAS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)
CLOCK: Clock = SYSTEM_CLOCK  # the admin tool's clock: its deadlines are the operator's, no node's
POLL_S = 0.5


# ---------------------------------------------------------------------- Kafka's reassignment JSON


def read_reassignment_json(text: str) -> Targets:
    """``{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"?}]}``."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AdminError(f"the reassignment plan is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise AdminError('the reassignment plan needs a "partitions" list (Kafka\'s reassignment JSON)')
    if doc.get("version", 1) != 1:
        raise AdminError(f"unsupported reassignment plan version {doc.get('version')!r} (only 1)")
    out: Targets = {}
    for i, item in enumerate(doc["partitions"]):
        try:
            topic, partition, replicas = item["topic"], item["partition"], item["replicas"]
        except (KeyError, TypeError):
            raise AdminError(f'partition entry {i} needs "topic", "partition" and "replicas"') from None
        ok = isinstance(topic, str) and isinstance(partition, int) and isinstance(replicas, list)
        if not ok or not all(isinstance(r, int) for r in replicas):
            raise AdminError(f"partition entry {i} is malformed: {item!r}")
        if (topic, partition) in out:
            raise AdminError(f"partition {topic}-{partition} appears twice in the plan")
        out[(topic, partition)] = tuple(replicas)
    return out


def reassignment_json(targets: Mapping[TopicPartition, tuple[int, ...]]) -> str:
    parts = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(targets.items())
    ]
    return json.dumps({"version": 1, "partitions": parts})


# ---------------------------------------------------------------------- plans from the cluster


def cluster_plan(
    state: ClusterState, *, remove: tuple[int, ...] = (), topics: set[str] | None = None
) -> Plan:
    """A rebalance plan for the cluster as it is (internal topics included: they are partitions too)."""
    assignment = {tp: r for tp, r in state.assignment.items() if topics is None or tp[0] in topics}
    isr = {tp: p.isr for tp, p in state.partitions.items()}
    try:
        return plan(assignment, state.racks(), remove=remove, isr=isr, alive=list(state.brokers))
    except PlanError as exc:
        raise AdminError(str(exc)) from None


def print_moves(p: Plan, out: TextIO = sys.stdout) -> None:
    if not p.moves:
        print("the cluster is balanced: nothing to move", file=out)
        return
    print(f"{len(p.moves)} partition(s) to move, {p.replica_moves()} replica(s) to copy:", file=out)
    width = max(len(f"{t}-{n}") for t, n in p.moves)
    for (t, n), target in sorted(p.moves.items()):
        before = ",".join(map(str, p.current[(t, n)]))
        print(f"  {f'{t}-{n}':<{width}}  {before:>12} -> {','.join(map(str, target))}", file=out)


# ---------------------------------------------------------------------- running moves


def throttle_configs(state: ClusterState, moves: Targets, rate: int | None
                     ) -> dict[tuple[int, str], dict[str, str | None]]:
    """Kafka's throttle settings for ``moves`` (``rate`` None: the settings that clear them)."""
    value = None if rate is None else str(rate)
    changes: dict[tuple[int, str], dict[str, str | None]] = {}
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in moves.items():
        known = state.partitions.get((topic, partition))
        current = known.target if known is not None else ()
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in current)
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in target if b not in current)
        brokers.update(current)
        brokers.update(target)
    for b in sorted(brokers):
        changes[(BROKER_RESOURCE, str(b))] = dict.fromkeys(THROTTLE_RATES, value)
    for topic in sorted(leaders):
        changes[(TOPIC_RESOURCE, topic)] = {
            LEADER_REPLICAS: None if rate is None else ",".join(leaders[topic]),
            FOLLOWER_REPLICAS: None if rate is None else ",".join(followers[topic]) or None,
        }
    return changes


def execute(
    admin: ClusterAdminSync,
    moves: Targets,
    *,
    throttle: int | None = None,
    timeout_s: float = 3600.0,
    out: TextIO = sys.stdout,
) -> float:
    """Submit ``moves``, follow them until none is in flight, elect preferred leaders; the seconds
    the moves took. A refused move is an AdminError (the others still run)."""
    if not moves:
        return 0.0
    state = admin.state()
    if throttle is not None:
        admin.alter_configs(throttle_configs(state, moves, throttle))
        print(f"replication throttled to {throttle} bytes/s on the brokers involved", file=out)
    started = CLOCK.monotonic_s()
    try:
        answers = admin.alter_reassignments(moves)
        refused = {tp: a for tp, a in answers.items() if a[0] != ErrorCode.NONE}
        for (t, p), (code, message) in sorted(refused.items()):
            print(f"  {t}-{p}: refused, {ErrorCode(code).name}: {message}", file=out)
        wait_for_moves(admin, [tp for tp in moves if tp not in refused], timeout_s=timeout_s, out=out)
    finally:
        if throttle is not None:
            admin.alter_configs(throttle_configs(state, moves, None))
    took = CLOCK.monotonic_s() - started
    elect_leaders(admin, list(moves))
    if refused:
        raise AdminError(f"{len(refused)} of {len(moves)} move(s) refused (see above)")
    return took


def wait_for_moves(admin: ClusterAdminSync, partitions: list[TopicPartition], *, timeout_s: float,
                   out: TextIO = sys.stdout) -> None:
    """Print progress until none of ``partitions`` is moving."""
    total = len(partitions)
    wanted = set(partitions)
    started = last_print = CLOCK.monotonic_s()
    last = -1
    while True:
        moving = wanted & set(admin.list_reassignments())
        done = total - len(moving)
        now = CLOCK.monotonic_s()
        if done != last or now - last_print > 10:
            print(f"  [{now - started:6.1f}s] {done}/{total} partition(s) moved", file=out, flush=True)
            if done == last:  # no progress for a while: say what each move waits for
                _print_waiting(admin, sorted(moving), out)
            last, last_print = done, now
        if not moving:
            return
        if now - started > timeout_s:
            raise AdminError(f"{len(moving)} move(s) still in flight after {timeout_s:g}s; "
                             "they go on in the cluster (see `pylog cluster describe`)")
        time.sleep(POLL_S)


def _print_waiting(admin: ClusterAdminSync, moving: list[TopicPartition], out: TextIO) -> None:
    parts = admin.state().partitions
    for tp in moving[:20]:
        p = parts.get(tp)
        if p is not None:
            print(f"    {tp[0]}-{tp[1]}: leader {p.leader}, replicas {list(p.replicas)}, in sync "
                  f"{list(p.isr)}, adding {list(p.adding)}, removing {list(p.removing)}",
                  file=out, flush=True)


def elect_leaders(admin: ClusterAdminSync, partitions: list[TopicPartition], attempts: int = 20) -> None:
    """Preferred-leader election on ``partitions``, retried while a new leader is not yet in sync."""
    pending = list(partitions)
    for _ in range(attempts):
        results = admin.elect_preferred_leaders(pending)
        pending = [tp for tp, code in results.items() if code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE]
        if not pending:
            return
        time.sleep(POLL_S)


def remove_broker(
    bootstrap_servers: str,
    broker_id: int,
    *,
    stop: Callable[[], None] | None = None,
    timeout_s: float = 3600.0,
    throttle: int | None = None,
    security: Any = None,
    out: TextIO = sys.stdout,
) -> None:
    """Move every replica off ``broker_id``, wait until it has stopped (``stop`` stops it, else
    someone must), then unregister it."""
    with ClusterAdminSync(bootstrap_servers, security=security) as admin:
        state = admin.state()
        holds = any(broker_id in p.replicas for p in state.partitions.values())
        if broker_id not in state.brokers and not holds:
            raise AdminError(f"broker {broker_id} is not in the cluster (brokers {sorted(state.brokers)})")
        if not [b for b in state.brokers if b != broker_id]:
            raise AdminError(f"broker {broker_id} is the last broker of the cluster")
        p = cluster_plan(state, remove=(broker_id,))
        print_moves(p, out)
        execute(admin, p.moves, throttle=throttle, timeout_s=timeout_s, out=out)
        left = [tp for tp, ps in admin.state().partitions.items() if broker_id in ps.replicas]
        if left:
            raise AdminError(f"broker {broker_id} still holds {len(left)} partition(s)")
        if stop is not None:
            stop()
        elif broker_id in state.brokers:
            print(f"broker {broker_id} holds no replicas now: stop it; it is unregistered once it has "
                  "stopped", file=out, flush=True)
        deadline = CLOCK.monotonic_s() + timeout_s
        while _still_there(admin, broker_id):
            if CLOCK.monotonic_s() > deadline:
                raise AdminError(f"broker {broker_id} is still running after {timeout_s:g}s; stop it and "
                                 "run this command again to unregister it")
            time.sleep(POLL_S)
        code, message = admin.unregister_broker(broker_id)
        if code not in (ErrorCode.NONE, ErrorCode.BROKER_ID_NOT_REGISTERED):
            raise AdminError(f"UnregisterBroker {broker_id}: {ErrorCode(code).name}: {message}")
        print(f"broker {broker_id} removed from the cluster", file=out)


def _still_there(admin: ClusterAdminSync, broker_id: int) -> bool:
    """Whether the cluster still lists ``broker_id`` as live (a broker stopping under our feet may
    drop the connection we asked through: ask again)."""
    for _ in range(10):
        try:
            return broker_id in admin.state().brokers
        except (ConnectionError, TimeoutError):
            time.sleep(POLL_S)
    return broker_id in admin.state().brokers


def read_plan_file(path: str) -> Targets:
    try:
        return read_reassignment_json(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise AdminError(f"cannot read {path}: {exc}") from None
