"""``pylog group list | describe | reset-offsets``, as ``kafka-consumer-groups.sh`` shows and does them."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from pylog.admin.common import AdminError, add_connection_options, admin_client, command, emit, print_table
from pylog.admin.common import topic_metadata as _topic_metadata


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
        groups = admin.list_groups()
    rows = sorted(({"group": g["group_id"], "state": g.get("group_state"), "type": g.get("group_type"),
                    "protocol_type": g.get("protocol_type")} for g in groups), key=lambda g: g["group"])
    emit(args, rows, lambda rs: print_table(["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"],
                                            [[r["group"], r["state"], r["type"], r["protocol_type"] or None]
                                             for r in rs]))
    return 0


def _describe_one(admin: Any, group: str) -> dict[str, Any]:
    from kafka.admin import OffsetSpec

    desc = admin.describe_groups([group])[group]
    committed = admin.list_group_offsets({group: None}).get(group, {})
    if desc.get("group_state") == "Dead" and not committed:
        raise AdminError(f"unknown group {group!r}: no such consumer group")
    owner: dict[tuple[str, int], dict[str, Any]] = {}
    members = []
    for m in desc.get("members", []):
        assigned = [(a["topic"], p) for a in (m.get("member_assignment") or {}).get("assigned_partitions", [])
                    for p in a["partitions"]]
        member = {"member_id": m["member_id"], "client_id": m.get("client_id"),
                  "host": m.get("client_host"), "group_instance_id": m.get("group_instance_id"),
                  "assignment": [{"topic": t, "partition": p} for t, p in sorted(assigned)]}
        members.append(member)
        for tp in assigned:
            owner[tp] = member
    keys = sorted({(tp.topic, tp.partition) for tp in committed} | set(owner))
    from kafka import TopicPartition

    tps = [TopicPartition(t, p) for t, p in keys]
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
    partitions = []
    for tp in tps:
        c = committed.get(tp)
        current = None if c is None or c.offset < 0 else int(c.offset)
        end = ends.get(tp)
        end_offset = None if end is None else int(end.offset)
        m = owner.get((tp.topic, tp.partition))
        partitions.append({
            "topic": tp.topic, "partition": tp.partition, "current_offset": current,
            "log_end_offset": end_offset,
            "lag": None if current is None or end_offset is None else max(end_offset - current, 0),
            "member_id": m and m["member_id"], "host": m and m["host"], "client_id": m and m["client_id"],
        })
    return {"group": group, "state": desc.get("group_state"), "protocol_type": desc.get("protocol_type"),
            "assignor": desc.get("protocol_data") or None, "members": members, "partitions": partitions}


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
    from kafka.admin import OffsetSpec, OffsetTimestamp
    from kafka.structs import OffsetAndMetadata

    with admin_client(args) as admin:
        desc = admin.describe_groups([args.group])[args.group]
        if desc.get("members"):
            raise AdminError(f"group {args.group!r} is active (state {desc.get('group_state')}, "
                             f"{len(desc['members'])} members): offsets can only be reset while it has no "
                             "members; stop its consumers first")
        committed = admin.list_group_offsets({args.group: None}).get(args.group, {})
        tps = _partitions(admin, args, committed)
        if not tps:
            raise AdminError(f"group {args.group!r} has no committed offsets; name topics with --topic")
        earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
        lo = {tp: int(earliest[tp].offset) for tp in tps}
        hi = {tp: int(latest[tp].offset) for tp in tps}
        if args.to_earliest:
            new = dict(lo)
        elif args.to_latest:
            new = dict(hi)
        elif args.to_offset is not None:
            new = {tp: min(max(args.to_offset, lo[tp]), hi[tp]) for tp in tps}
        else:
            when = _timestamp_ms(args.to_timestamp)
            found = admin.list_partition_offsets({tp: OffsetTimestamp(when) for tp in tps})
            new = {tp: hi[tp] if found[tp].offset < 0 else int(found[tp].offset) for tp in tps}
        if args.execute:
            result = admin.alter_group_offsets(
                args.group, {tp: OffsetAndMetadata(new[tp], "", -1) for tp in tps})
            failed = {tp: err for tp, err in result.items() if getattr(err, "errno", 0)}
            if failed:
                raise AdminError("could not commit offsets: " + ", ".join(
                    f"{tp.topic}-{tp.partition}: {err.__name__}" for tp, err in failed.items()))
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "current_offset": None if committed.get(tp) is None else int(committed[tp].offset),
             "new_offset": new[tp]} for tp in sorted(tps)]
    data = {"group": args.group, "executed": bool(args.execute), "partitions": rows}
    emit(args, data, _render_reset)
    return 0


def _partitions(admin: Any, args: argparse.Namespace, committed: dict[Any, Any]) -> list[Any]:
    from kafka import TopicPartition

    if args.all_topics:
        return sorted(committed)
    specs = [(t.partition(":")[0], t.partition(":")[2]) for t in args.topic]
    meta = _topic_metadata(admin, sorted({name for name, _ in specs}))
    out: set[Any] = set()
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
        out |= {TopicPartition(name, p) for p in chosen}
    return sorted(out)


def _render_reset(data: dict[str, Any]) -> None:
    print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                [[data["group"], p["topic"], p["partition"], p["current_offset"], p["new_offset"]]
                 for p in data["partitions"]])
    if not data["executed"]:
        print("\n(dry run: nothing changed; add --execute to commit these offsets)")
