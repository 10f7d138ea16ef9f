"""The four throughput rows where pylog is held to a goal, in one run, as one table.

- 4-partition consume of 1 KB records, pylog against Tansu (goal: >= 1.0x);
- lz4 produce of 1 KB records, pylog against Tansu (goal: >= 1.0x);
- RF=3 acks=all against RF=1 on the same 3-node pylog cluster, with a producer that sends 1 MB
  batches without idempotence (goal: >= 0.4x);
- catch-up consume of 1 KB records whose recent-batches cache is cold, as a fraction of the
  loopback limit (goal: >= 0.4).

The rows are measured by bench_clients.py (4-partition consume, one broker each, same librdkafka
client; the catch-up row), bench_client_ceiling.py (lz4 produce, beside the same producer against
a broker that stores nothing: the client's ceiling, which no broker can pass) and
bench_replication.py (the cluster row), called here with the same settings as their own runs.
The pylog and reference columns are medians of ``--repeat`` runs; the ratio is the median of the
runs' own ratios (each run's pair measured back to back), listed in the last column.

    python bench/bench_throughput.py                        # about 2 minutes on 2 idle cores
    python bench/bench_throughput.py --records 400000 --repl-records 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_client_ceiling
import bench_clients
import bench_replication

CONSUME_4P = "consume 1 KB, acks=1, none, 4p"
CATCH_UP = "catch-up consume 1 KB, acks=1, none, 1p, cold cache"
RF3_BIG = "RF=3, acks=all, 1 MB batches"
RF1_BIG = "RF=1, acks=all, 1 MB batches"


def client_rows(args: argparse.Namespace) -> dict[tuple[str, str], dict[str, list[float | None]]]:
    """bench_clients' 4-partition rows and its catch-up row, pylog and Tansu."""
    cli = bench_clients.parser().parse_args(
        [
            "--records", str(args.records),
            "--repeat", str(args.repeat),
            "--latency-rate", "0",
            "--only", "4p",
            *(["--catchup-records", str(args.catchup_records)] if args.catchup_records else []),
        ]
    )  # fmt: skip
    return {(r.label, r.metric): r.samples for r in bench_clients.run(cli)}


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got and len(got) == len(values) else None


def table(lines: list[tuple[str, str, list[float | None], list[float | None], str, float | None]]) -> str:
    """One markdown table: row, metric, pylog, reference (medians), the median of the runs' own
    ratios (each run's pylog figure over the reference measured beside it: pairing keeps the
    ratio meaningful when the machine's speed drifts), goal, and each run's ratio."""
    header = ["acceptance row", "metric", "pylog", "reference", "ratio", "goal", "met", "per run"]
    out = []
    for label, metric, ours, ref, ref_name, goal in lines:
        a, b = _median(ours), _median(ref)
        paired = [x / y if x is not None and y else None for x, y in zip(ours, ref)]
        ratio = _median(paired)
        runs = " ".join("-" if x is None else f"{x:.2f}" for x in paired)
        out.append(
            [
                label,
                metric,
                bench_clients.fmt(a),
                f"{bench_clients.fmt(b)} ({ref_name})",
                "-" if ratio is None else f"{ratio:.2f}",
                "-" if goal is None else f">= {goal:g}",
                "-" if goal is None or ratio is None else ("yes" if ratio >= goal else "no"),
                runs,
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(header, *out)]
    text = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |"]
    text.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cells in out:
        text.append(
            "| "
            + " | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
            + " |"
        )
    return "\n".join(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--records",
        type=int,
        default=1_000_000,
        help="bench_clients' --records: the 1 KB rows use half (default 500,000 records)",
    )
    ap.add_argument(
        "--catchup-records", type=int, default=0, help="records of the catch-up row (default: 1 KB rows')"
    )
    ap.add_argument("--repl-records", type=int, default=300_000, help="records per replication row")
    ap.add_argument("--repeat", type=int, default=3, help="runs of every row (medians; brokers alternate)")
    ap.add_argument("--json", type=Path, help="also write the samples as JSON here")
    args = ap.parse_args()

    clients = client_rows(args)
    ceiling = bench_client_ceiling.run(
        argparse.Namespace(records=args.records // 2, size=1000, codec="lz4", repeat=args.repeat)
    )
    repl, _ = bench_replication.run(args.repl_records, args.repeat, "1 MB", seconds=0)

    def c(label: str, metric: str, kind: str) -> list[float | None]:
        return list(clients.get((label, metric), {}).get(kind, [None]))

    def z(kind: str, i: int) -> list[float | None]:
        return [s[i] for s in ceiling[kind]] or [None]

    def r(label: str, i: int) -> list[float | None]:
        return [s[i] for s in repl.get(label, [])] or [None]

    lines = [
        ("4-partition consume, 1 KB", "records/s", c(CONSUME_4P, "records/s", "pylog"),
         c(CONSUME_4P, "records/s", "tansu"), "Tansu", 1.0),
        ("4-partition consume, 1 KB", "broker CPU s / M records",
         c(CONSUME_4P, "broker CPU s / M records", "pylog"),
         c(CONSUME_4P, "broker CPU s / M records", "tansu"), "Tansu", None),
        ("lz4 produce, 1 KB", "records/s", z("pylog", 0), z("tansu", 0), "Tansu", 1.0),
        ("lz4 produce, 1 KB", "broker CPU s / M records", z("pylog", 1), z("tansu", 1), "Tansu", None),
        ("lz4 produce, 1 KB", "records/s, of the client's ceiling", z("pylog", 0), z("null", 0), "null",
         None),
        ("lz4 produce, 1 KB", "Tansu's records/s, of the ceiling", z("tansu", 0), z("null", 0), "null",
         None),
        ("RF=3 acks=all, 1 MB batches, 3 nodes", "records/s", r(RF3_BIG, 0), r(RF1_BIG, 0), "RF=1", 0.4),
        ("RF=3 acks=all, 1 MB batches, 3 nodes", "cluster CPU s / M records", r(RF3_BIG, 1), r(RF1_BIG, 1),
         "RF=1", None),
        ("catch-up consume, 1 KB, cold cache", "MB/s (plain Fetch client)",
         c(CATCH_UP, "MB/s (plain Fetch client)", "pylog"),
         c(CATCH_UP, "MB/s loopback limit (same bytes)", "pylog"), "loopback", 0.4),
    ]  # fmt: skip
    print(f"\npylog throughput goals, median of {args.repeat} runs (pylog / reference)\n")
    print(table(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        samples = [
            {"row": a, "metric": m, "pylog": o, "reference": ref, "reference_name": n, "goal": g}
            for a, m, o, ref, n, g in lines
        ]
        args.json.write_text(json.dumps(samples, indent=2))


if __name__ == "__main__":
    main()
