"""``pylog group list | describe | reset-offsets``, as ``kafka-consumer-groups.sh`` shows and does them."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from pylog.admin.common import AdminError, add_connection_options, admin_client, command, emit, print_table
from pylog.admin.common import topic_metadata as _topic_metadata

TopicPartition = tuple[str, int]


def add_commands(sub: Any) -> None:
    """Add the ``pylog group`` subcommands."""
    p = sub.add_parser("list", help="consumer groups with their state")
    add_connection_options(p)
    command(p, list_groups)

    p = sub.add_parser("describe", help="members, assignments, committed offsets and lag per partition")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    add_connection_options(p)
    command(p, describe)

    p = sub.add_parser("reset-offsets", help="move an inactive group's committed offsets (dry run unless "
                                             "--execute)")
    p.add_argument("group", metavar="GROUP")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("-t", "--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic (all its partitions, or the listed ones), repeatable")
    which.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept within the log)")
    to.add_argument("--to-timestamp", metavar="WHEN",
                    help="the first offset at or after WHEN: epoch milliseconds or an ISO 8601 date-time "
                         "(local time without a zone)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets (default: only show them)")
    add_connection_options(p)
    command(p, reset_offsets)


def list_groups(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        groups = admin.run(lambda a: a.list_groups())
    rows = [{"group": g.group_id, "state": g.state or None, "type": g.group_type or None,
             "protocol_type": g.protocol_type} for g in groups]
    emit(args, rows, lambda rs: print_table(["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"],
                                            [[r["group"], r["state"], r["type"], r["protocol_type"] or None]
                                             for r in rs]))
    return 0


def _log_offsets(admin: Any, tps: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int | None]:
    """ListOffsets (read_uncommitted) of each partition at ``timestamp`` (-2 start, -1 end)."""
    topics = sorted({t for t, _ in tps})
    info = admin.run(lambda a: a.cluster(topics))
    out: dict[TopicPartition, int | None] = {}
    for topic in topics:
        parts = {p: i for p, i in info.topics.get(topic, {}).items() if (topic, p) in tps}
        found = admin.run(lambda a, topic=topic, parts=parts: a.list_offsets(topic, parts, timestamp))
        out.update({(topic, p): off for p, off in found.items()})
    return out


def _describe_one(admin: Any, group: str) -> dict[str, Any]:
    from pylog.sdk.admin import LATEST

    desc = admin.run(lambda a: a.describe_group(group))
    committed = admin.run(lambda a: a.committed_offsets(group, desc.coordinator))
    if desc.state == "Dead" and not committed:
        raise AdminError(f"unknown group {group!r}: no such consumer group")
    owner: dict[TopicPartition, dict[str, Any]] = {}
    members = []
    for m in desc.members:
        assigned = sorted((t, p) for t, ps in m.assignment.items() for p in ps)
        member = {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                  "group_instance_id": m.group_instance_id,
                  "assignment": [{"topic": t, "partition": p} for t, p in assigned]}
        members.append(member)
        for tp in assigned:
            owner[tp] = member
    tps = sorted(set(committed) | set(owner))
    ends = _log_offsets(admin, tps, LATEST) if tps else {}
    partitions = []
    for tp in tps:
        current = committed.get(tp)
        end_offset = ends.get(tp)
        m = owner.get(tp)
        partitions.append({
            "topic": tp[0], "partition": tp[1], "current_offset": current,
            "log_end_offset": end_offset,
            "lag": None if current is None or end_offset is None else max(end_offset - current, 0),
            "member_id": m and m["member_id"], "host": m and m["host"], "client_id": m and m["client_id"],
        })
    return {"group": group, "state": desc.state, "protocol_type": desc.protocol_type,
            "assignor": desc.protocol or None, "members": members, "partitions": partitions}


def describe(args: argparse.Namespace) -> int:
    with admin_client(args) as admin:
        out = [_describe_one(admin, g) for g in args.groups]
    emit(args, out, _render_describe)
    return 0


def _render_describe(groups: list[dict[str, Any]]) -> None:
    for i, g in enumerate(groups):
        if i:
            print()
        print(f"GROUP     {g['group']}")
        print(f"STATE     {g['state']}")
        print(f"ASSIGNOR  {g['assignor'] or '-'}")
        print(f"MEMBERS   {len(g['members'])}")
        print()
        rows = [[g["group"], p["topic"], p["partition"], p["current_offset"], p["log_end_offset"], p["lag"],
                 p["member_id"], p["host"], p["client_id"]] for p in g["partitions"]]
        unassigned = [m for m in g["members"] if not m["assignment"]]
        rows += [[g["group"], None, None, None, None, None, m["member_id"], m["host"], m["client_id"]]
                 for m in unassigned]
        print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                     "HOST", "CLIENT-ID"], rows)


def _timestamp_ms(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise AdminError(f"--to-timestamp takes epoch milliseconds or an ISO 8601 date-time, not {text!r}"
                         ) from None


def reset_offsets(args: argparse.Namespace) -> int:
    from pylog.protocol.errors import ErrorCode
    from pylog.sdk.admin import EARLIEST, LATEST

    with admin_client(args) as admin:
        desc = admin.run(lambda a: a.describe_group(args.group))
        if desc.members:
            raise AdminError(f"group {args.group!r} is active (state {desc.state}, "
                             f"{len(desc.members)} members): offsets can only be reset while it has no "
                             "members; stop its consumers first")
        committed = admin.run(lambda a: a.committed_offsets(args.group, desc.coordinator))
        tps = _partitions(admin, args, committed)
        if not tps:
            raise AdminError(f"group {args.group!r} has no committed offsets; name topics with --topic")
        earliest, latest = _log_offsets(admin, tps, EARLIEST), _log_offsets(admin, tps, LATEST)
        lo = {tp: earliest[tp] or 0 for tp in tps}
        hi = {tp: latest[tp] or 0 for tp in tps}
        if args.to_earliest:
            new = dict(lo)
        elif args.to_latest:
            new = dict(hi)
        elif args.to_offset is not None:
            new = {tp: min(max(args.to_offset, lo[tp]), hi[tp]) for tp in tps}
        else:
            found = _log_offsets(admin, tps, _timestamp_ms(args.to_timestamp))
            new = {tp: hi[tp] if (off := found[tp]) is None or off < 0 else off for tp in tps}
        if args.execute:
            result = admin.run(lambda a: a.commit_offsets(args.group, new))
            failed = {tp: code for tp, code in result.items() if code}
            if failed:
                raise AdminError("could not commit offsets: " + ", ".join(
                    f"{t}-{p}: {ErrorCode.of(code).name}" for (t, p), code in sorted(failed.items())))
    rows = [{"topic": tp[0], "partition": tp[1], "current_offset": committed.get(tp), "new_offset": new[tp]}
            for tp in sorted(tps)]
    data = {"group": args.group, "executed": bool(args.execute), "partitions": rows}
    emit(args, data, _render_reset)
    return 0


def _partitions(admin: Any, args: argparse.Namespace, committed: dict[TopicPartition, int]
                ) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    specs = [(t.partition(":")[0], t.partition(":")[2]) for t in args.topic]
    meta = _topic_metadata(admin, sorted({name for name, _ in specs}))
    out: set[TopicPartition] = set()
    for name, parts in specs:
        available = {p["partition_index"] for p in meta[name]["partitions"]}
        if parts:
            try:
                chosen = {int(p) for p in parts.split(",")}
            except ValueError:
                raise AdminError(f"--topic takes TOPIC or TOPIC:P,P..., not {name}:{parts}") from None
            missing = chosen - available
            if missing:
                raise AdminError(f"topic {name!r} has no partition {', '.join(map(str, sorted(missing)))}")
        else:
            chosen = available
        out |= {(name, p) for p in chosen}
    return sorted(out)


def _render_reset(data: dict[str, Any]) -> None:
    print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                [[data["group"], p["topic"], p["partition"], p["current_offset"], p["new_offset"]]
                 for p in data["partitions"]])
    if not data["executed"]:
        print("\n(dry run: nothing changed; add --execute to commit these offsets)")
