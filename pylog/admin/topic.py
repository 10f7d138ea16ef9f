"""``pylog topic list | describe | create | delete | alter-config | produce | consume | reassign``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from pylog.admin.common import (
    AdminError,
    add_connection_options,
    admin_client,
    command,
    emit,
    parse_key_value,
    print_table,
    topic_metadata,
)

CONSUME_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


def add_commands(sub: Any) -> None:
    """Add the ``pylog topic`` subcommands."""
    p = sub.add_parser("list", help="topics with their partition and replica counts")
    add_connection_options(p)
    p.add_argument("-i", "--internal", action="store_true", help="include internal topics (__*)")
    command(p, list_topics)

    p = sub.add_parser("describe", help="partitions (leader, replicas, ISR, offsets) and configs")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    add_connection_options(p)
    command(p, describe)

    p = sub.add_parser("create", help="create topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1,
                   help="partition count (default: the broker's num.partitions)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1,
                   help="replicas per partition (default: the broker's default.replication.factor)")
    p.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config, repeatable (retention.ms=86400000, cleanup.policy=compact)")
    add_connection_options(p)
    command(p, create)

    p = sub.add_parser("delete", help="delete topics")
    p.add_argument("topics", nargs="+", metavar="TOPIC")
    add_connection_options(p)
    command(p, delete)

    p = sub.add_parser("alter-config", help="set or remove topic config overrides")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    p.add_argument("-d", "--delete", action="append", default=[], metavar="KEY",
                   help="back to the default, repeatable")
    add_connection_options(p)
    command(p, alter_config)

    p = sub.add_parser("reassign", help="move partitions as a plan says (Kafka's reassignment JSON)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--plan", metavar="FILE",
                      help="the --reassignment-json-file of kafka-reassign-partitions: run it and wait")
    what.add_argument("--cancel", metavar="FILE", help="cancel the moves of this plan that are in flight")
    what.add_argument("--list", action="store_true", help="the reassignments in flight")
    p.add_argument("--no-wait", action="store_true", help="submit the plan and return")
    p.add_argument("--throttle", type=int, default=None, metavar="BYTES/S", help="replication throttle")
    add_connection_options(p, formats=())
    command(p, reassign)

    p = sub.add_parser("produce", help="produce the lines of stdin, one record each")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-K", "--key-separator", metavar="SEP",
                   help=r"split each line at the first SEP into key and value (e.g. '\t')")
    p.add_argument("-p", "--partition", type=int, default=None, help="all records to this partition")
    p.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header on every record, repeatable")
    add_connection_options(p)
    command(p, produce)

    p = sub.add_parser("consume", help="print records")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-o", "--offset", default="beginning",
                   help="beginning (default), end, an offset, or -N for N before the end")
    p.add_argument("-n", "--num", type=int, default=None, metavar="N", help="stop after N records")
    p.add_argument("-e", "--exit", action="store_true",
                   help="stop at the end of the partitions instead of waiting for more")
    p.add_argument("-p", "--partition", type=int, action="append", default=None,
                   help="only this partition, repeatable")
    add_connection_options(p, formats=())
    p.add_argument("--format", default="{value}",
                   help="json (one object per line), or a template with {topic} {partition} {offset} "
                   r"{timestamp} {key} {value} {headers} (default '{value}'; \t and \n work)")
    command(p, consume)


# --------------------------------------------------------------------------- list / describe


def _internal(t: dict[str, Any]) -> bool:
    return bool(t.get("is_internal")) or str(t["name"]).startswith("__")


def list_topics(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        topics = topic_metadata(admin)
    rows = [
        {"topic": name, "partitions": len(t["partitions"]),
         "replicas": max((len(p["replica_nodes"]) for p in t["partitions"]), default=0),
         "internal": _internal(t)}
        for name, t in sorted(topics.items())
        if args.internal or not _internal(t)
    ]
    emit(args, rows, lambda rs: print_table(["TOPIC", "PARTITIONS", "REPLICAS"],
                                            [[r["topic"], r["partitions"], r["replicas"]] for r in rs]))
    return 0


def describe(args: argparse.Namespace) -> int:
    from pylog.admin.common import client_security
    from pylog.sdk.admin import EARLIEST, LATEST
    from pylog.sdk.tiers import describe_tiers

    with admin_client(args) as admin:
        topics = topic_metadata(admin, args.topics)
        info = admin.run(lambda a: a.cluster(list(args.topics)))
        earliest = {n: admin.run(lambda a, n=n: a.list_offsets(n, info.topics[n], EARLIEST))
                    for n in args.topics}
        latest = {n: admin.run(lambda a, n=n: a.list_offsets(n, info.topics[n], LATEST))
                  for n in args.topics}
        configs = admin.run(lambda a: a.topic_configs(args.topics))
        tiers = {n: describe_tiers(admin, n, client_security(args)) for n in args.topics
                 if (configs.get(n, {}).get("remote.storage.enable", (None, ""))[0] or "") == "true"}
    out = []
    for name in args.topics:
        t = topics[name]
        parts = []
        for p in sorted(t["partitions"], key=lambda p: p["partition_index"]):
            i = p["partition_index"]
            row = {"partition": i, "leader": p["leader_id"], "replicas": p["replica_nodes"],
                   "isr": p["isr_nodes"], "log_start_offset": earliest[name].get(i),
                   "high_watermark": latest[name].get(i)}
            tier = (tiers.get(name) or {}).get(i)
            if tier is not None:  # remote.storage.enable: both tiers' offsets and bytes
                row |= {"local_log_start_offset": tier.local_log_start_offset,
                        "remote_end_offset": tier.remote_end_offset, "local_bytes": tier.local_bytes,
                        "remote_bytes": tier.remote_bytes, "remote_segments": tier.remote_segments,
                        "upload_lag": tier.upload_lag}
            parts.append(row)
        cfg = {k: {"value": value, "source": source}
               for k, (value, source) in sorted(configs.get(name, {}).items())}
        out.append({"topic": name, "topic_id": t.get("topic_id"), "internal": _internal(t),
                    "partitions": parts, "configs": cfg})
    emit(args, out, _render_describe)
    return 0


def _render_describe(topics: list[dict[str, Any]]) -> None:
    for i, t in enumerate(topics):
        if i:
            print()
        print(f"TOPIC       {t['topic']}")
        print(f"TOPIC ID    {t['topic_id']}")
        print(f"PARTITIONS  {len(t['partitions'])}")
        print()
        print_table(["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK"],
                    [[p["partition"], p["leader"], p["replicas"], p["isr"], p["log_start_offset"],
                      p["high_watermark"]] for p in t["partitions"]])
        if any("remote_end_offset" in p for p in t["partitions"]):
            print()
            print("REMOTE TIER (remote.storage.enable)")
            print_table(["PARTITION", "LOCAL-START-OFFSET", "REMOTE-END-OFFSET", "LOCAL-BYTES",
                         "REMOTE-BYTES", "REMOTE-SEGMENTS", "UPLOAD-LAG"],
                        [[p["partition"], p["local_log_start_offset"], p["remote_end_offset"],
                          p["local_bytes"], p["remote_bytes"], p["remote_segments"], p["upload_lag"]]
                         for p in t["partitions"] if "remote_end_offset" in p])
        print()
        print_table(["CONFIG", "VALUE", "SOURCE"],
                    [[k, v["value"], v["source"]] for k, v in t["configs"].items()])


# --------------------------------------------------------------------------- create / delete / alter


def create(args: argparse.Namespace) -> int:
    configs = dict(parse_key_value(c, "a topic config") for c in args.config)
    spec = (args.partitions, args.replication_factor, configs)
    with admin_client(args) as admin:
        res = admin.run(lambda a: a.create_topics(dict.fromkeys(args.topics, spec)))
    rows = [{"topic": name, "error": _error(code, message)} for name, code, message in res]
    return _report(args, rows, "created")


def delete(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        topic_metadata(admin, args.topics)  # unknown topics are an error before anything is deleted
        res = admin.run(lambda a: a.delete_topics(args.topics))
    rows = [{"topic": name, "error": _error(code, message)} for name, code, message in res]
    return _report(args, rows, "deleted")


def alter_config(args: argparse.Namespace) -> int:
    from pylog.admin.common import cluster_admin
    from pylog.client.errors import KafkaError
    from pylog.sdk.cluster_admin import TOPIC_RESOURCE

    if not args.set and not args.delete:
        raise AdminError("nothing to change: pass --set KEY=VALUE and/or --delete KEY")
    ops: dict[str, str | None] = dict(parse_key_value(s, "a topic config") for s in args.set)
    ops.update(dict.fromkeys(args.delete))
    with admin_client(args) as admin:
        topic_metadata(admin, [args.topic])
    error = None
    with cluster_admin(args) as cluster:
        try:
            cluster.alter_configs({(TOPIC_RESOURCE, args.topic): ops})
        except KafkaError as exc:
            error = str(exc)
    return _report(args, [{"topic": args.topic, "error": error}], "altered")


def _error(code: int, message: str | None) -> str | None:
    if not code:
        return None
    from pylog.protocol.errors import ErrorCode

    return message or ErrorCode.of(code).name


def _report(args: argparse.Namespace, rows: list[dict[str, Any]], done: str) -> int:
    emit(args, rows, lambda rs: print_table(["TOPIC", "STATUS"],
                                            [[r["topic"], r["error"] or done] for r in rs]))
    return 1 if any(r["error"] for r in rows) else 0


# --------------------------------------------------------------------------- produce / consume


def _unescape(text: str) -> str:
    return text.replace("\\t", "\t").replace("\\n", "\n")


def produce(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from pylog.admin.common import client_security
    from pylog.sdk.writer import write_topic

    headers = [(k, v.encode()) for k, v in (parse_key_value(h, "a header") for h in args.header)]
    sep = None if args.key_separator is None else _unescape(args.key_separator)
    with admin_client(args) as admin:
        topic_metadata(admin, [args.topic])
    keys, values = [], []
    for key, value in _records(sys.stdin.buffer, sep):
        keys.append(key)
        values.append(value)
    columns: dict[str, Any] = {"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())}
    if headers:
        header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
        one = [{"key": k, "value": v} for k, v in headers]
        columns["headers"] = pa.array([one] * len(values), header_type)
    result = write_topic(pa.table(columns), args.topic, bootstrap_servers=args.bootstrap_servers,
                         key="key", value="value", headers="headers" if headers else None,
                         partition=args.partition, request_timeout_s=max(args.timeout, 2.0), progress=False,
                         security=client_security(args)) if values else None
    ranges = sorted(result.offsets.items()) if result is not None else []
    data = {"topic": args.topic, "records": len(values),
            "partitions": [{"partition": p, "first_offset": lo, "last_offset": hi} for p, (lo, hi) in ranges]}
    emit(args, data, _render_produced)
    return 0


def _records(stream: Any, sep: str | None) -> Iterable[tuple[bytes | None, bytes]]:
    bsep = None if sep is None else sep.encode()
    for raw in stream:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        if bsep is not None and bsep in line:
            key, _, value = line.partition(bsep)
            yield key, value
        else:
            yield None, line


def _render_produced(data: dict[str, Any]) -> None:
    print(f"produced {data['records']} record{'s' if data['records'] != 1 else ''} to {data['topic']}")
    if data["partitions"]:
        print_table(["PARTITION", "FIRST-OFFSET", "LAST-OFFSET"],
                    [[p["partition"], p["first_offset"], p["last_offset"]] for p in data["partitions"]])


def consume(args: argparse.Namespace) -> int:
    from pylog.admin.tail import tail
    from pylog.sdk.admin import EARLIEST, LATEST

    with admin_client(args) as admin:
        meta = topic_metadata(admin, [args.topic])[args.topic]
        available = sorted(p["partition_index"] for p in meta["partitions"])
        wanted = available if args.partition is None else args.partition
        unknown = sorted(set(wanted) - set(available))
        if unknown:
            raise AdminError(f"topic {args.topic!r} has no partition {', '.join(map(str, unknown))} "
                             f"(it has {len(available)})")
        template = None if args.format == "json" else _unescape(args.format)
        info = admin.run(lambda a: a.cluster([args.topic]))
        parts = {p: info.topics[args.topic][p] for p in wanted}
        begin = admin.run(lambda a: a.list_offsets(args.topic, parts, EARLIEST))
        end = admin.run(lambda a: a.list_offsets(args.topic, parts, LATEST))
        starts = {p: _start_offset(args.offset, begin[p] or 0, end[p] or 0) for p in wanted}
        stops = {p: end[p] or 0 for p in wanted} if args.exit else None
        for records in tail(admin, args.topic, starts, stops, limit=args.num):
            sys.stdout.write("".join(_format_record(r, template) + "\n" for r in records))
            sys.stdout.flush()
    return 0


def _start_offset(spec: str, begin: int, end: int) -> int:
    if spec in ("beginning", "earliest", "start", "oldest"):
        return begin
    if spec in ("end", "latest", "newest"):
        return end
    try:
        n = int(spec)
    except ValueError:
        raise AdminError(f"-o takes beginning, end, an offset or -N, not {spec!r}") from None
    return max(begin, end + n) if n < 0 else min(max(n, begin), end)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def _format_record(r: Any, template: str | None) -> str:
    fields = {
        "topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
        "key": _text(r.key), "value": _text(r.value),
        "headers": [{"key": k, "value": _text(v)} for k, v in (r.headers or [])],
    }
    if template is None:
        return json.dumps(fields, ensure_ascii=False)
    human = dict(fields, key=fields["key"] or "", value=fields["value"] or "",
                 headers=",".join(f"{h['key']}={h['value']}" for h in fields["headers"]))
    try:
        return template.format(**human)
    except (KeyError, IndexError, ValueError) as exc:
        raise AdminError(f"bad --format {template!r} ({exc}); fields: " + " ".join(
            "{" + f + "}" for f in CONSUME_FIELDS)) from None


def reassign(args: argparse.Namespace) -> int:
    from pylog.admin.common import cluster_admin
    from pylog.admin.moves import execute, read_plan_file
    from pylog.protocol.errors import ErrorCode

    with cluster_admin(args) as admin:
        if args.list:
            moving = admin.list_reassignments()
            print_table(["TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                        [[t, p, r, a or None, x or None] for (t, p), (r, a, x) in sorted(moving.items())])
            return 0
        if args.cancel:
            answers = admin.alter_reassignments(dict.fromkeys(read_plan_file(args.cancel)))
            failed = 0
            for (t, p), (code, message) in sorted(answers.items()):
                status = "cancelled" if code == 0 else f"{ErrorCode(code).name}: {message}"
                failed += code not in (0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                print(f"{t}-{p}: {status}")
            return 1 if failed else 0
        targets = read_plan_file(args.plan)
        if args.no_wait:
            answers = admin.alter_reassignments(targets)
            bad = {tp: a for tp, a in answers.items() if a[0]}
            for (t, p), (code, message) in sorted(bad.items()):
                print(f"{t}-{p}: {ErrorCode(code).name}: {message}", file=sys.stderr)
            print(f"{len(targets) - len(bad)} reassignment(s) started")
            return 1 if bad else 0
        took = execute(admin, targets, throttle=args.throttle, timeout_s=max(args.timeout, 3600.0))
        print(f"{len(targets)} partition(s) reassigned in {took:.1f}s")
    return 0
