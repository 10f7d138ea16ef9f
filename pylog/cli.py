"""Command line: ``pylog broker`` starts a single-node cluster with defaults that just work."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from pylog.config import BROKER_CONFIGS, BrokerConfig, ConfigError, parse_key_values
from pylog.properties import read_properties

log = logging.getLogger("pylog")


def parse_host_port(value: str, *, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``[::1]:PORT`` or a bare port."""
    value = value.strip()
    if value.startswith("PLAINTEXT://"):
        value = value[len("PLAINTEXT://") :]
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = default_host, value
    host = host.strip("[]") or default_host
    try:
        n = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range in {value!r}")
    return host, n


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pylog", description="A Kafka-compatible log stored as Apache Arrow."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("broker", help="run a single-node broker (broker + controller in one process)")
    b.add_argument("--data-dir", default=None, help="where logs and metadata live (default ./pylog-data)")
    b.add_argument(
        "--config-file",
        default=None,
        metavar="FILE",
        help="a Kafka server.properties file (node.id, process.roles, controller.quorum.voters, ...)",
    )
    b.add_argument("--listen", type=parse_host_port, default=None, help="HOST:PORT (default 127.0.0.1:9092)")
    b.add_argument(
        "--advertised-listener",
        type=parse_host_port,
        default=None,
        help="HOST:PORT clients are told to connect to (default: the bound address)",
    )
    b.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Kafka broker config, repeatable (num.partitions=3, log.retention.ms=...)",
    )
    b.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "broker":
        return _run_broker(args)
    return 2


def _run_broker(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        settings = read_properties(args.config_file) if args.config_file else {}
        settings.update(parse_key_values(args.config))
        for name in [n for n in settings if n not in BROKER_CONFIGS]:
            log.warning("ignoring unknown broker config %s", name)  # as Kafka does
            del settings[name]
        config = BrokerConfig(settings)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir or config.raw("log.dirs") or config.raw("log.dir") or "./pylog-data")
    listen = args.listen
    try:
        import uvloop  # type: ignore[import-not-found]

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    return runner(_serve(config, data_dir, listen, args.advertised_listener))


async def _serve(
    config: BrokerConfig, data_dir: Path, listen: tuple[str, int] | None, advertised: tuple[str, int] | None
) -> int:
    from pylog.broker.broker import Broker

    try:
        broker = Broker(config, data_dir, listen=listen, advertised=advertised)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            signal.signal(sig, lambda *_: loop.call_soon_threadsafe(stop.set))
    try:
        await broker.start()
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        await broker.stop()
        return 2
    except OSError as exc:
        log.error("pylog broker failed to start: %s", exc)
        await broker.stop()
        return 1
    host, port = broker.bound_address
    # A test harness parses this line for the bound port.
    print(f"pylog broker listening on {_fmt(host)}:{port}, data in {data_dir.resolve()}", flush=True)
    log.info("pylog broker listening on %s:%d, data in %s", _fmt(host), port, data_dir.resolve())
    try:
        await stop.wait()
    finally:
        log.info("pylog broker shutting down")
        await broker.stop()
    return 0


def _fmt(host: str) -> str:
    return f"[{host}]" if ":" in host else host
