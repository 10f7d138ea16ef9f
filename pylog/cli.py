"""Command line: ``pylog broker`` starts a single-node cluster with defaults that just work;
``pylog storage format`` prepares a data directory before its first start (Kafka's
``kafka-storage format``: the cluster id, and SCRAM users with ``--add-scram``);
``pylog cluster`` / ``topic`` / ``group`` look at and manage any Kafka-compatible cluster (their
commands live in `pylog.admin`). This module only builds the parser and dispatches.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from pylog import __version__
from pylog.config import (
    BrokerConfig,
    ConfigError,
    check_static_broker_configs,
    note_not_acted_on,
    parse_key_values,
)
from pylog.local_processes import exit_with_parent_pid
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
    parser.add_argument("--version", action="version", version=f"pylog {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("broker", help="run a single-node broker (broker + controller in one process)")
    b.add_argument("--data-dir", default=None,
                   help="where metadata and logs live (default: the first of log.dirs, else log.dir or "
                        "./pylog-data; the other log.dirs hold logs too)")
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
    b.set_defaults(run=_run_broker)
    st = sub.add_parser("storage", help="prepare a data directory (kafka-storage)")
    st_sub = st.add_subparsers(dest="storage_command", required=True)
    f = st_sub.add_parser("format", help="write meta.properties and the bootstrap records of a new node")
    f.add_argument(
        "--data-dir", default=None,
        help="the node's data directory (default: the first of log.dirs, else log.dir or ./pylog-data)"
    )
    f.add_argument("--config-file", default=None, metavar="FILE", help="the node's server.properties")
    f.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="broker config, repeatable"
    )
    f.add_argument(
        "-t", "--cluster-id", default=None, help="the cluster id (default: cluster.id, else random)"
    )
    f.add_argument(
        "-S",
        "--add-scram",
        action="append",
        default=[],
        metavar="SPEC",
        help="a SCRAM user the first controller creates: 'SCRAM-SHA-256=[name=alice,password=alice-secret]' "
        "(also iterations=, or salt= and saltedpassword= in base64); repeatable",
    )
    f.add_argument("-g", "--ignore-formatted", action="store_true", help="succeed if already formatted")
    quorum = f.add_mutually_exclusive_group()
    quorum.add_argument(
        "-s",
        "--standalone",
        action="store_true",
        help="with controller.quorum.bootstrap.servers: this controller is the quorum's only voter",
    )
    quorum.add_argument(
        "-I",
        "--initial-controllers",
        default=None,
        metavar="LIST",
        help="with controller.quorum.bootstrap.servers: the first voters, id@host:port:directory-id,...",
    )
    quorum.add_argument(
        "-N",
        "--no-initial-controllers",
        action="store_true",
        help="with controller.quorum.bootstrap.servers: a controller that joins a running quorum",
    )
    f.set_defaults(run=_storage)
    st_sub.add_parser("random-uuid", help="print a new cluster id").set_defaults(run=_storage)

    from pylog.admin import cluster, group, topic

    c = sub.add_parser("cluster", help="look at a Kafka-compatible cluster")
    cluster_sub = c.add_subparsers(dest="cluster_command", required=True, metavar="COMMAND")
    cluster.add_commands(cluster_sub)
    t = sub.add_parser("topic", help="list, describe, create, delete, configure, produce to, consume topics")
    topic.add_commands(t.add_subparsers(dest="topic_command", required=True, metavar="COMMAND"))
    g = sub.add_parser("group", help="list and describe consumer groups, reset their offsets")
    group.add_commands(g.add_subparsers(dest="group_command", required=True, metavar="COMMAND"))
    from pylog.metrics import top

    tp = sub.add_parser("top", help="a live table of every node, read from their metrics listeners")
    top.add_arguments(tp)
    tp.set_defaults(run=top.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    return int(args.run(args))


def _storage(args: argparse.Namespace) -> int:
    import base64
    import uuid

    if args.storage_command == "random-uuid":
        print(base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode())
        return 0
    from pylog.broker.control.metadata import META_PROPERTIES, load_meta_properties
    from pylog.broker.datapath.log_dirs import first_log_dir
    from pylog.cluster.bootstrap import write_bootstrap, write_bootstrap_voters
    from pylog.cluster.records import UserScramCredentialRecord
    from pylog.cluster.voters import directory_id_str
    from pylog.security.scram import parse_add_scram

    try:
        config, _warnings = _load_config(args)
        records = []
        for spec in args.add_scram:
            name, cred = parse_add_scram(spec)
            records.append(
                UserScramCredentialRecord(
                    name, cred.mechanism, cred.salt, cred.stored_key, cred.server_key, cred.iterations
                )
            )
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    try:
        data_dir = Path(args.data_dir) if args.data_dir else first_log_dir(config)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    if (data_dir / META_PROPERTIES).exists():
        if args.ignore_formatted:
            print(f"{data_dir} is already formatted")
            return 0
        print(
            f"pylog: {data_dir} is already formatted (use --ignore-formatted to accept that)", file=sys.stderr
        )
        return 1
    try:
        voters, directory_id = _initial_voters(args, config)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        cluster_id, directory_id = load_meta_properties(
            data_dir, config.node_id, args.cluster_id or config.raw("cluster.id"), directory_id
        )
    except RuntimeError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 1
    if records:
        write_bootstrap(data_dir, records)
    if voters is not None:
        write_bootstrap_voters(data_dir, voters)
    print(
        f"Formatted {data_dir} for cluster {cluster_id} ({len(records)} SCRAM credential(s) to bootstrap), "
        f"directory id {directory_id_str(directory_id)}"
        + (f", initial voters {voters}" if voters is not None else "")
    )
    return 0


def _initial_voters(args: argparse.Namespace, config: BrokerConfig) -> tuple[Any, Any]:
    """The voter set formatting writes (kraft.version 1), and this node's directory id if it names one."""
    from pylog.cluster.bootstrap import parse_initial_controllers
    from pylog.cluster.node_config import NodeSettings
    from pylog.cluster.voters import Endpoint, VoterNode, VoterSet, new_directory_id

    chosen = args.standalone or args.initial_controllers is not None or args.no_initial_controllers
    if not chosen:
        return None, None
    settings = NodeSettings.from_config(config)
    if settings.voters:
        raise ConfigError(
            "--standalone, --initial-controllers and --no-initial-controllers are for a quorum found "
            "through controller.quorum.bootstrap.servers, not controller.quorum.voters"
        )
    if not settings.is_controller:
        raise ConfigError("only a controller (process.roles with controller) is formatted with voters")
    listener = settings.controller_listener
    if listener is None:
        raise ConfigError("controller.listener.names names no listener in listeners")
    if args.no_initial_controllers:
        return None, None
    if args.standalone:
        advertised = {li.name: li for li in settings.advertised}.get(listener.name, listener)
        directory_id = new_directory_id()
        endpoint = Endpoint(listener.name, advertised.host, advertised.port)
        return VoterSet((VoterNode(settings.node_id, directory_id, (endpoint,)),)), directory_id
    voters = parse_initial_controllers(args.initial_controllers, listener.name)
    mine = voters.get(settings.node_id)
    return voters, mine.directory_id if mine is not None else None


def _load_config(args: argparse.Namespace) -> tuple[BrokerConfig, list[str]]:
    """The node's settings from ``--config-file`` and ``--config``, with warnings to log."""
    # a properties file may hold names of other Kafka versions or plugins: ignored with a
    # warning, as Kafka does; a --config name typed by hand must be a known one
    from_file = read_properties(args.config_file) if args.config_file else {}
    settings, warnings = check_static_broker_configs(from_file, strict=False)
    given, more = check_static_broker_configs(parse_key_values(args.config))
    settings.update(given)
    note_not_acted_on(settings)
    return BrokerConfig(settings), [*warnings, *more]


def _run_broker(args: argparse.Namespace) -> int:
    _skip_pyarrow_pandas_probe()
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config, warnings = _load_config(args)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    for warning in warnings:
        log.warning("%s", warning)
    from pylog.broker.datapath.log_dirs import first_log_dir

    try:
        data_dir = Path(args.data_dir) if args.data_dir else first_log_dir(config)
    except ConfigError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 2
    if data_dir.exists() and not data_dir.is_dir():
        print(f"pylog: data directory {data_dir} is not a directory", file=sys.stderr)
        return 2
    listen = args.listen
    from pylog.broker.datapath.memory import keep_freed_memory_for_reuse

    keep_freed_memory_for_reuse()  # this process serves: megabyte buffers come and go per request
    runner: Callable[[Coroutine[Any, Any, int]], int]
    try:
        import uvloop

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
    # What start-up built (modules, the metadata image, open logs) lives as long as the broker:
    # frozen, later full collections need not walk it (shorter pauses while serving).
    gc.collect()
    gc.freeze()
    host, port = broker.bound_address
    for server in broker.servers[1:]:  # printed before the line below, which says the broker is up
        print(f"pylog listener {server.listener} on {_fmt(server.host)}:{server.port}", flush=True)
    if broker.schema_registry is not None:  # its scheme follows the listeners' security (http / https)
        print(f"pylog schema registry on {broker.schema_registry.url}", flush=True)
    for url in broker.metrics.urls if broker.metrics is not None else ():
        print(f"pylog metrics on {url}", flush=True)
    # The one line saying the broker serves (test harnesses and LocalBroker parse it for the port).
    print(f"pylog broker listening on {_fmt(host)}:{port}, data in {data_dir.resolve()}", flush=True)
    parent = exit_with_parent_pid()
    watch = asyncio.ensure_future(_exit_with_parent(parent, stop)) if parent is not None else None
    try:
        await stop.wait()
    finally:
        if watch is not None:
            watch.cancel()
        log.info("pylog broker shutting down")
        await broker.stop()
        log.info("pylog broker stopped")
    return 0


async def _exit_with_parent(parent: int, stop: asyncio.Event) -> None:
    """Set `stop` once this process's parent is no longer `parent` (it died and we were re-parented)."""
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    log.warning("pylog broker: its parent process %d went away; stopping", parent)
    stop.set()


def _skip_pyarrow_pandas_probe() -> None:
    """A broker never hands Arrow data to pandas, but pyarrow imports pandas (when installed) the first
    time pa.array() is given a Python list, to ask whether it is a pandas object: 0.3 s with the event
    loop stalled (at the first group join) and 40 MB resident, for nothing. That probe runs once, here,
    with pandas out of sight; an explicit pandas conversion would still import it."""
    if "pandas" in sys.modules:
        return

    class _PandasOutOfSight:
        @staticmethod
        def find_spec(name: str, path: object = None, target: object = None) -> None:
            if name == "pandas":
                raise ModuleNotFoundError("not imported by the broker", name=name)

    import pyarrow as pa

    sys.meta_path.insert(0, _PandasOutOfSight)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_PandasOutOfSight)


def _fmt(host: str) -> str:
    return f"[{host}]" if ":" in host else host
