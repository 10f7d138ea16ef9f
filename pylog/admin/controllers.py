"""The controller quorum from the command line (Kafka's ``kafka-metadata-quorum``):

* ``pylog cluster quorum``: the leader, every voter and observer with its directory id, log end
  and lag, and the voters' endpoints (DescribeQuorum v2);
* ``pylog cluster add-controller --config-file controller.properties``: adds the controller that
  file describes (its ``node.id``, the ``directory.id`` of its formatted data directory, its
  controller listener) as a voter (AddRaftVoter); it must be running and caught up;
* ``pylog cluster remove-controller --controller-id N --controller-directory-id DIR``: removes
  that voter (RemoveRaftVoter).

Requests go to a broker (``-b``, which forwards them to the active controller, as Kafka's do) or
straight to controllers with ``--bootstrap-controller``. A change is refused while another one is
committing or while the new controller is still catching up (REQUEST_TIMED_OUT): the command
retries until ``--timeout``.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from pylog.admin.common import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, AdminError, command, emit, print_table
from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

CLOCK: Clock = SYSTEM_CLOCK  # the admin tool's clock: its deadlines are the operator's, no node's

RETRYABLE = (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_CONTROLLER)


def add_commands(sub: Any) -> None:
    """Add ``quorum``, ``add-controller`` and ``remove-controller`` to ``pylog cluster``."""
    q = sub.add_parser("quorum", help="the controller quorum: leader, voters and observers (DescribeQuorum)")
    _target_options(q, formats=True)
    command(q, quorum)
    a = sub.add_parser("add-controller", help="add a running, caught-up controller as a voter (AddRaftVoter)")
    a.add_argument("--config-file", required=True, metavar="FILE", help="the new controller's properties")
    _target_options(a)
    command(a, add_controller)
    r = sub.add_parser("remove-controller", help="remove a voter from the quorum (RemoveRaftVoter)")
    r.add_argument("--controller-id", type=int, required=True, metavar="ID")
    r.add_argument(
        "--controller-directory-id", required=True, metavar="DIR", help="as `pylog cluster quorum` shows it"
    )
    _target_options(r)
    command(r, remove_controller)


def _target_options(p: argparse.ArgumentParser, *, formats: bool = False) -> None:
    default = os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    p.add_argument("-b", "--bootstrap-servers", default=default, metavar="HOST:PORT[,...]", help="a broker")
    p.add_argument(
        "--bootstrap-controller", default=None, metavar="HOST:PORT[,...]", help="controllers, asked directly"
    )
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="how long to keep trying")
    if formats:
        p.add_argument("--format", choices=("table", "json"), default="table")


def _addresses(args: argparse.Namespace) -> list[str]:
    given = args.bootstrap_controller or args.bootstrap_servers
    return [a.strip() for a in given.split(",") if a.strip()]


def send(args: argparse.Namespace, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """Send to each address in turn until one answers without a retryable error, retrying them all
    until ``--timeout``; the last answer."""
    from pylog.cluster_info import request

    deadline = CLOCK.monotonic_s() + args.timeout
    last: Any = None
    errors: list[str] = []
    while True:
        for address in _addresses(args):
            try:
                last = request(address, api_key, version, body, timeout_s=min(args.timeout, 60.0))
            except OSError as exc:
                errors.append(str(exc))
                continue
            if last.error_code not in RETRYABLE:
                return last
        if CLOCK.monotonic_s() >= deadline:
            if last is None:
                tried = ",".join(_addresses(args))
                raise AdminError(f"no node answered at {tried}: {'; '.join(errors[-2:])}")
            return last
        time.sleep(0.5)


def _check(resp: Any, what: str) -> None:
    if resp.error_code:
        name = ErrorCode.of(resp.error_code).name
        raise AdminError(f"{what}: {name}: {getattr(resp, 'error_message', None) or ''}".rstrip(": "))


def controller_identity(config_file: str) -> tuple[int, Any, list[dict[str, Any]], str]:
    """(node id, directory id, listeners, cluster id) of the controller a properties file describes."""
    from pylog.broker.control.metadata import read_meta_properties
    from pylog.broker.datapath.log_dirs import first_log_dir
    from pylog.cluster.node_config import NodeSettings
    from pylog.cluster.voters import parse_directory_id
    from pylog.config import BrokerConfig, ConfigError, check_static_broker_configs
    from pylog.properties import read_properties

    try:
        settings_map, _ = check_static_broker_configs(read_properties(config_file), strict=False)
        config = BrokerConfig(settings_map)
        settings = NodeSettings.from_config(config)
        data_dir = first_log_dir(config)
    except (OSError, ConfigError) as exc:
        raise AdminError(f"{config_file}: {exc}") from None
    listener = settings.controller_listener
    if not settings.is_controller or listener is None:
        raise AdminError(
            f"{config_file} does not describe a controller (process.roles, controller.listener.names)"
        )
    props = read_meta_properties(data_dir)
    if "directory.id" not in props:
        raise AdminError(f"{data_dir} is not formatted (pylog storage format --no-initial-controllers)")
    advertised = {li.name: li for li in settings.advertised}.get(listener.name, listener)
    listeners = [{"name": listener.name, "host": advertised.host, "port": advertised.port}]
    return settings.node_id, parse_directory_id(props["directory.id"]), listeners, props.get("cluster.id", "")


def add_controller(args: argparse.Namespace) -> int:
    node_id, directory_id, listeners, cluster_id = controller_identity(args.config_file)
    body = {
        "cluster_id": cluster_id or None,
        "timeout_ms": 30_000,
        "voter_id": node_id,
        "voter_directory_id": directory_id,
        "listeners": listeners,
        "ack_when_committed": True,
    }
    _check(send(args, ApiKey.ADD_RAFT_VOTER, 0, body), f"adding controller {node_id}")
    from pylog.cluster.voters import directory_id_str

    print(f"Added controller {node_id} with directory id {directory_id_str(directory_id)} to the quorum")
    return 0


def remove_controller(args: argparse.Namespace) -> int:
    from pylog.cluster.voters import parse_directory_id

    try:
        directory_id = parse_directory_id(args.controller_directory_id)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    body = {"cluster_id": None, "voter_id": args.controller_id, "voter_directory_id": directory_id}
    _check(send(args, ApiKey.REMOVE_RAFT_VOTER, 0, body), f"removing controller {args.controller_id}")
    print(f"Removed controller {args.controller_id} ({args.controller_directory_id}) from the quorum")
    return 0


def quorum(args: argparse.Namespace) -> int:
    from pylog.cluster_info import describe_quorum

    deadline = CLOCK.monotonic_s() + args.timeout
    while True:
        try:
            info = describe_quorum(",".join(_addresses(args)), timeout_s=min(args.timeout, 10.0))
            break
        except OSError as exc:
            if CLOCK.monotonic_s() >= deadline:
                raise AdminError(str(exc)) from None
            time.sleep(0.5)

    def replica(v: Any, role: str) -> dict[str, Any]:
        return {
            "node_id": v.node_id,
            "directory_id": v.directory_id,
            "role": role,
            "log_end_offset": v.log_end_offset,
            "lag": v.lag,
            "endpoints": info.endpoints.get(v.node_id, []),
        }

    data = {
        "leader_id": info.leader_id,
        "leader_epoch": info.leader_epoch,
        "high_watermark": info.high_watermark,
        "replicas": [replica(v, "leader" if v.node_id == info.leader_id else "voter") for v in info.voters]
        + [replica(v, "observer") for v in info.observers],
    }
    emit(args, data, _render)
    return 0


def _render(data: dict[str, Any]) -> None:
    print(f"LEADER          {data['leader_id']}")
    print(f"EPOCH           {data['leader_epoch']}")
    print(f"HIGH WATERMARK  {data['high_watermark']}")
    print()
    rows = [
        [
            r["node_id"],
            r["directory_id"] or "-",
            r["role"],
            r["log_end_offset"],
            r["lag"],
            ",".join(r["endpoints"]),
        ]
        for r in data["replicas"]
    ]
    print_table(["NODE", "DIRECTORY-ID", "ROLE", "LOG-END-OFFSET", "LAG", "ENDPOINTS"], rows)
