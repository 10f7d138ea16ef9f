"""What the admin commands share: connection options, output (tables or JSON) and plain errors."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "PYLOG_BOOTSTRAP_SERVERS"  # like rpk's RPK_BROKERS: a default for -b


class AdminError(Exception):
    """A failure the user can act on; printed as one line, exit code 1."""


def add_connection_options(parser: argparse.ArgumentParser, *, formats: Sequence[str] = ("table", "json")
                           ) -> None:
    default = os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    parser.add_argument("-b", "--bootstrap-servers", default=default, metavar="HOST:PORT[,...]",
                        help=f"a broker of the cluster (default: ${BOOTSTRAP_ENV}, else {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for the cluster (default 10)")
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="client settings for a secured cluster, as Kafka's tools take them "
                             "(security.protocol, sasl.mechanism, sasl.jaas.config, "
                             "ssl.truststore.location, ...)")
    parser.add_argument("-X", dest="client_settings", action="append", default=[], metavar="KEY=VALUE",
                        help="one client setting (security.protocol=SASL_SSL, sasl.username=..., "
                             "ssl.ca.location=...), repeatable")
    if formats:
        parser.add_argument("--format", choices=formats, default=formats[0],
                            help="human table (default) or JSON for scripts")


def command(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> None:
    """Run `run` for this subcommand, turning AdminError and Kafka errors into one line and exit 1."""
    parser.set_defaults(run=lambda args: _guarded(run, args))


def _guarded(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    from pylog.client.errors import KafkaError, TransportError

    try:
        return run(args)
    except AdminError as exc:
        print(f"pylog: {exc}", file=sys.stderr)
        return 1
    except (KafkaError, TransportError) as exc:
        print(f"pylog: {describe_kafka_error(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def describe_kafka_error(exc: BaseException) -> str:
    name = type(exc).__name__
    text = str(exc)
    return text if text.startswith(name) else f"{name}: {text}"


def _ms(args: argparse.Namespace) -> int:
    return max(int(args.timeout * 1000), 1000)


def _unreachable(args: argparse.Namespace) -> AdminError:
    secured = getattr(args, "command_config", None) or getattr(args, "client_settings", None)
    hint = "; or it refused these credentials (see the logged error)" if secured else ""
    return AdminError(f"cannot reach a Kafka cluster at {args.bootstrap_servers} within {args.timeout:g}s "
                      f"(is a broker running there? pass -b HOST:PORT{hint})")


@contextlib.contextmanager
def admin_client(args: argparse.Namespace) -> Iterator[Any]:
    """`pylog.sdk.admin.Admin` (pylog's client) on ``--bootstrap-servers``, connected; an
    unreachable cluster is an AdminError."""
    from pylog.sdk.admin import Admin

    admin = Admin(args.bootstrap_servers, client_id="pylog-admin", request_timeout_s=max(args.timeout, 1.0),
                  security=client_security(args))
    try:
        try:
            admin.run(_started)
        except ConnectionError:
            raise _unreachable(args) from None
        yield admin
    finally:
        with contextlib.suppress(Exception):
            admin.close()


async def _started(admin: Any) -> None:
    """Nothing: `Admin.run` connects first."""


def client_security(args: argparse.Namespace) -> Any:
    """The ``ClientSecurity`` of ``--command-config`` and ``-X`` (Kafka client names)."""
    from pylog.config import ConfigError, parse_key_values
    from pylog.properties import read_properties
    from pylog.security.client import SECURITY_CONFIG_NAMES, ClientSecurity

    try:
        from_file = read_properties(args.command_config) if getattr(args, "command_config", None) else {}
        # a tool's config file may hold other client settings too: those are not pylog's business here
        settings = {k: v for k, v in from_file.items() if k in SECURITY_CONFIG_NAMES}
        settings.update(parse_key_values(getattr(args, "client_settings", None) or []))
        return ClientSecurity.from_config(settings)
    except (OSError, ValueError, ConfigError) as exc:
        raise AdminError(f"client settings: {exc}") from None


@contextlib.contextmanager
def cluster_admin(args: argparse.Namespace) -> Iterator[Any]:
    """The SDK's `ClusterAdminSync` on ``--bootstrap-servers`` (reassignments, UnregisterBroker)."""
    from pylog.sdk.client import KafkaError
    from pylog.sdk.cluster_admin import ClusterAdminSync

    admin = ClusterAdminSync(args.bootstrap_servers, security=client_security(args),
                             request_timeout_s=max(args.timeout, 1.0))
    try:
        yield admin
    except (ConnectionError, TimeoutError):
        raise _unreachable(args) from None
    except KafkaError as exc:
        raise AdminError(str(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            admin.close()


def topic_metadata(admin: Any, topics: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Metadata of `topics` (all when None) by name, as plain data; an unknown topic is an
    AdminError."""
    info = admin.run(lambda a: a.cluster(None if topics is None else list(topics)))
    found = {
        name: {"name": name, "topic_id": info.topic_ids.get(name),
               "is_internal": name in info.internal_topics, "error_code": info.topic_errors.get(name, 0),
               "partitions": [{"partition_index": p.partition, "leader_id": p.leader,
                               "replica_nodes": p.replicas, "isr_nodes": p.isr} for p in parts.values()]}
        for name, parts in info.topics.items()
    }
    if topics is not None:
        missing = [t for t in topics if t not in found or found[t].get("error_code")]
        if missing:
            raise AdminError(f"unknown topic{'s' if len(missing) > 1 else ''} "
                             + ", ".join(repr(t) for t in missing))
    return found


def emit(args: argparse.Namespace, data: Any, render: Callable[[Any], None]) -> None:
    """``--format json``: `data` as JSON; otherwise `render(data)` prints the human form."""
    if getattr(args, "format", "table") == "json":
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        render(data)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Columns aligned on the widest cell, like rpk and kafka-topics.sh."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for line in [list(headers), *cells]:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def parse_key_value(item: str, what: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise AdminError(f"expected {what} as KEY=VALUE, got {item!r}")
    return key.strip(), value
