"""How much a broker can change a produce row: the same librdkafka producer against pylog, Tansu
and a broker that stores nothing (null_broker.py, the client's own ceiling on this machine), the
brokers alternating within each run.

A row whose null-broker figure is close to both real brokers is bound by the client: the broker
only decides how much of the machine it leaves the client, and the broker CPU column is the
figure that separates the brokers.

    python bench/bench_client_ceiling.py                       # lz4 produce of 1 KB records, 5 runs
    python bench/bench_client_ceiling.py --codec none --size 100 --repeat 3
    python bench/bench_client_ceiling.py --segment-format 1,2 --brokers pylog,null  # formats side by side
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_clients import Scenario, fmt, produce
from common import BenchBroker, create_topic

BROKERS = ("pylog", "tansu", "null")


def broker_labels(args: argparse.Namespace) -> dict[str, tuple[str, dict[str, str]]]:
    """Label -> (broker kind, config): pylog once per `--segment-format` ("pylog f1", "pylog f2"
    when there are several)."""
    formats = [f.strip() for f in args.segment_format.split(",") if f.strip()]
    out: dict[str, tuple[str, dict[str, str]]] = {}
    for kind in args.brokers.split(","):
        if kind == "pylog":
            for f in formats:
                label = "pylog" if len(formats) == 1 else f"pylog f{f}"
                out[label] = ("pylog", {"pylog.segment.format": f})
        else:
            out[kind] = (kind, {})
    return out


def run(args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    """(records/s, broker CPU s per million records) of every run, by broker."""
    sc = Scenario(args.size, compression=args.codec)
    kinds = broker_labels(args)
    labels = tuple(kinds)
    brokers = {label: BenchBroker(kind, config=config).start() for label, (kind, config) in kinds.items()}
    samples: dict[str, list[tuple[float, float, float]]] = {label: [] for label in labels}
    try:
        for b in brokers.values():
            create_topic(b.bootstrap, "ceiling", 1)
            produce(b.bootstrap, "ceiling", sc, args.records // 10)  # connections, caches, first segment
        for rep in range(args.repeat):
            order = labels[rep % len(labels):] + labels[: rep % len(labels)]  # each goes first in turn
            for kind in order:
                b = brokers[kind]
                before = b.stats()
                seconds = produce(b.bootstrap, "ceiling", sc, args.records)
                after = b.stats()
                cpu, user = after.cpu_s - before.cpu_s, after.user_s - before.user_s
                per_m = 1e6 / args.records
                samples[kind].append((args.records / seconds, cpu * per_m, user * per_m))
                print(f"[{kind}] run {rep + 1}: {args.records / seconds:,.0f} records/s", file=sys.stderr)
    finally:
        for b in brokers.values():
            b.stop()
    return samples


def table(samples: dict[str, list[tuple[float, float, float]]], label: str) -> str:
    rate = {k: [s[0] for s in v] for k, v in samples.items()}
    cpu = {k: [s[1] for s in v] for k, v in samples.items()}
    user = {k: [s[2] for s in v] for k, v in samples.items()}

    def ratios(a: str, b: str) -> list[float]:
        return [x / y for x, y in zip(rate[a], rate[b])]

    lines = [
        f"{label}: median of {len(next(iter(rate.values())))} runs, brokers alternating",
        "",
        "| broker | records/s | broker CPU s / M records | of which user | records/s per run |",
        "|---|---:|---:|---:|---|",
    ]
    for kind in samples:
        runs = " ".join(f"{x / 1e3:,.0f}k" for x in rate[kind])
        lines.append(f"| {kind} | {fmt(statistics.median(rate[kind]))} | "
                     f"{fmt(statistics.median(cpu[kind]))} | {fmt(statistics.median(user[kind]))} | {runs} |")
    lines += ["", "| ratio | median | per run |", "|---|---:|---|"]
    pylogs = [k for k in samples if k.startswith("pylog")]
    pairs = [(p, o) for p in pylogs for o in ("tansu", "null") if o in samples]
    pairs += [("tansu", "null")] if "tansu" in samples and "null" in samples else []
    pairs += [(b, a) for a, b in itertools.pairwise(pylogs)]
    for a, b in pairs:
        r = ratios(a, b)
        lines.append(f"| {a} / {b} | {statistics.median(r):.2f} | {' '.join(f'{x:.2f}' for x in r)} |")
    for a, b in itertools.pairwise(pylogs):
        c = [x / y for x, y in zip(cpu[b], cpu[a])]
        lines.append(f"| CPU {b} / {a} | {statistics.median(c):.2f} | {' '.join(f'{x:.2f}' for x in c)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000, help="records per run")
    ap.add_argument("--size", type=int, default=1000, help="record size in bytes")
    ap.add_argument("--codec", default="lz4", help="the producer's compression.type")
    ap.add_argument("--repeat", type=int, default=5, help="runs per broker")
    ap.add_argument("--brokers", default=",".join(BROKERS), help="which of pylog, tansu, null to run")
    ap.add_argument("--segment-format", default="1", help="pylog.segment.format of the pylog broker; "
                    "several (1,2) run one pylog broker each, side by side")
    args = ap.parse_args()
    label = f"produce {args.size} B, acks=1, {args.codec}, 1 partition"
    print("\n" + table(run(args), label))


if __name__ == "__main__":
    main()
