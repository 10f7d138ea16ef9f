"""What a node is, from Kafka's KRaft settings: its id, roles, listeners and the controller voters.

A node with neither ``controller.quorum.voters`` nor ``controller.quorum.bootstrap.servers`` is a
single-node cluster: broker and a controller quorum of one in the same process, the broker
listener only. ``controller.quorum.voters`` fixes the voters (a static quorum, kraft.version 0);
``controller.quorum.bootstrap.servers`` only says where to find the quorum, whose voters are in
the metadata log (kraft.version 1, KIP-853). Every setting is checked against the others before
anything starts (a voter list that does not name a controller node, a controller listener that
is missing or does not match the node's voter entry, ...), so a wrong file stops the start with
one clear sentence instead of a cluster that never forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pylog.config import BrokerConfig, ConfigError

BROKER, CONTROLLER = "broker", "controller"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    def with_port(self, port: int) -> Listener:
        return Listener(self.name, self.host, port, self.security_protocol)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class Voter:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class NodeSettings:
    node_id: int
    roles: frozenset[str]
    voters: tuple[Voter, ...]
    bootstrap_servers: tuple[tuple[str, int], ...]
    listeners: tuple[Listener, ...]
    advertised: tuple[Listener, ...]
    controller_listener_names: tuple[str, ...]
    inter_broker_listener_name: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    election_timeout_ms: int
    request_timeout_ms: int

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles

    @property
    def standalone(self) -> bool:
        """A quorum of this node alone (no voters and no bootstrap servers configured)."""
        return not self.voters and not self.bootstrap_servers

    @property
    def dynamic_quorum(self) -> bool:
        """The voters come from the metadata log: found through controller.quorum.bootstrap.servers."""
        return not self.voters and bool(self.bootstrap_servers)

    @property
    def controller_listener_name(self) -> str:
        return self.controller_listener_names[0] if self.controller_listener_names else "CONTROLLER"

    @property
    def voter_ids(self) -> tuple[int, ...]:
        return tuple(v.node_id for v in self.voters) if self.voters else (self.node_id,)

    def voter(self, node_id: int) -> Voter | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    @property
    def broker_listeners(self) -> tuple[Listener, ...]:
        return tuple(li for li in self.listeners if li.name not in self.controller_listener_names)

    @property
    def controller_listener(self) -> Listener | None:
        for name in self.controller_listener_names:
            for li in self.listeners:
                if li.name == name:
                    return li
        return None

    @classmethod
    def from_config(cls, config: BrokerConfig, *, listen: tuple[str, int] | None = None) -> NodeSettings:
        """Parse and cross-check the KRaft settings; ``listen`` replaces the PLAINTEXT listener.

        Raises ConfigError with a message naming the setting at fault."""
        node_id = config.node_id
        if node_id < 0:
            raise ConfigError(f"node.id must be >= 0, got {node_id}")
        roles = frozenset(_list(config, "process.roles"))
        unknown = roles - {BROKER, CONTROLLER}
        if not roles or unknown:
            raise ConfigError(
                f"process.roles must be broker, controller or both, got {config.raw('process.roles')!r}"
            )
        voters = parse_voters(_list(config, "controller.quorum.voters"))
        bootstrap = parse_bootstrap_servers(_list(config, "controller.quorum.bootstrap.servers"))
        protocols = parse_protocol_map(_list(config, "listener.security.protocol.map"))
        controller_names = tuple(n.upper() for n in _list(config, "controller.listener.names"))
        listeners = parse_listeners(_list(config, "listeners"), protocols)
        if listen is not None:
            host, port = listen
            others = [li for li in listeners if li.name != "PLAINTEXT"]
            listeners = (Listener("PLAINTEXT", host, port, protocols.get("PLAINTEXT", "PLAINTEXT")), *others)
        advertised = parse_listeners(_list(config, "advertised.listeners"), protocols)
        inter_broker = (config.raw("inter.broker.listener.name") or "").upper()
        settings = cls(
            node_id=node_id,
            roles=roles,
            voters=voters,
            bootstrap_servers=bootstrap,
            listeners=listeners,
            advertised=advertised,
            controller_listener_names=controller_names,
            inter_broker_listener_name=inter_broker,
            session_timeout_ms=config.int("broker.session.timeout.ms"),
            heartbeat_interval_ms=config.int("broker.heartbeat.interval.ms"),
            election_timeout_ms=config.int("controller.quorum.election.timeout.ms"),
            request_timeout_ms=config.int("controller.quorum.request.timeout.ms"),
        )
        settings._check()
        if not inter_broker and settings.broker_listeners:
            plain = [li.name for li in settings.broker_listeners]
            name = "PLAINTEXT" if "PLAINTEXT" in plain else plain[0]
            settings = replace(settings, inter_broker_listener_name=name)
        return settings

    def _check(self) -> None:
        names = [li.name for li in self.listeners]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ConfigError(f"listeners names {sorted(dup)} more than once")
        if self.heartbeat_interval_ms <= 0 or self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise ConfigError(
                "broker.session.timeout.ms must be larger than broker.heartbeat.interval.ms "
                f"({self.session_timeout_ms} <= {self.heartbeat_interval_ms})"
            )
        if self.election_timeout_ms < 10:
            raise ConfigError("controller.quorum.election.timeout.ms must be at least 10")
        if self.is_broker and not self.broker_listeners:
            raise ConfigError("a broker needs a listener that is not a controller listener (listeners)")
        if self.inter_broker_listener_name and self.inter_broker_listener_name not in {
            li.name for li in self.broker_listeners
        }:
            raise ConfigError(
                f"inter.broker.listener.name {self.inter_broker_listener_name} is not one of the "
                f"broker listeners {[li.name for li in self.broker_listeners]}"
            )
        if self.standalone:
            if self.roles != {BROKER, CONTROLLER}:
                raise ConfigError(
                    "without controller.quorum.voters a node runs broker and controller together; "
                    f"process.roles={','.join(sorted(self.roles))} needs controller.quorum.voters "
                    "or controller.quorum.bootstrap.servers"
                )
            return
        if self.dynamic_quorum:
            self._check_dynamic()
            return
        ids = [v.node_id for v in self.voters]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"controller.quorum.voters names a node id twice: {ids}")
        if not self.controller_listener_names:
            raise ConfigError("controller.listener.names must be set when controller.quorum.voters is")
        if self.is_controller:
            mine = self.voter(self.node_id)
            if mine is None:
                listed = ",".join(f"{v.node_id}@{v.host}:{v.port}" for v in self.voters)
                raise ConfigError(
                    f"node.id {self.node_id} has the controller role but is not in "
                    f"controller.quorum.voters ({listed})"
                )
            listener = self.controller_listener
            if listener is None:
                raise ConfigError(
                    f"controller.listener.names {list(self.controller_listener_names)} names no listener "
                    f"in listeners {[str(li) for li in self.listeners]}"
                )
            if listener.port not in (0, mine.port):
                raise ConfigError(
                    f"the controller listener {listener} does not match this node's voter entry "
                    f"{mine.node_id}@{mine.host}:{mine.port} in controller.quorum.voters"
                )
        else:
            if self.voter(self.node_id) is not None:
                raise ConfigError(
                    f"node.id {self.node_id} is in controller.quorum.voters but process.roles lacks "
                    "controller"
                )
            if self.controller_listener is not None:
                raise ConfigError("a broker-only node must not have a controller listener in listeners")


    def _check_dynamic(self) -> None:
        if not self.controller_listener_names:
            raise ConfigError(
                "controller.listener.names must be set when controller.quorum.bootstrap.servers is"
            )
        if self.is_controller and self.controller_listener is None:
            raise ConfigError(
                f"controller.listener.names {list(self.controller_listener_names)} names no listener "
                f"in listeners {[str(li) for li in self.listeners]}"
            )
        if not self.is_controller and self.controller_listener is not None:
            raise ConfigError("a broker-only node must not have a controller listener in listeners")


def _list(config: BrokerConfig, name: str) -> list[str]:
    raw = config.raw(name)
    return [p.strip() for p in raw.split(",") if p.strip()] if raw else []


def parse_voters(items: Sequence[str]) -> tuple[Voter, ...]:
    """``["1@host:9093", ...]`` (controller.quorum.voters)."""
    out = []
    for item in items:
        node, sep, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        try:
            if not sep or not colon or not host:
                raise ValueError
            voter = Voter(int(node), host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError(
                f"controller.quorum.voters entry {item!r} is not id@host:port (e.g. 1@127.0.0.1:9093)"
            ) from None
        if voter.node_id < 0 or not 0 < voter.port < 65536:
            raise ConfigError(f"controller.quorum.voters entry {item!r} has a bad id or port")
        out.append(voter)
    return tuple(out)


def parse_bootstrap_servers(items: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """``["host:9093", ...]`` (controller.quorum.bootstrap.servers)."""
    out = []
    for item in items:
        host, colon, port = item.rpartition(":")
        try:
            if not colon or not host:
                raise ValueError
            n = int(port)
        except ValueError:
            raise ConfigError(
                f"controller.quorum.bootstrap.servers entry {item!r} is not host:port (e.g. 127.0.0.1:9093)"
            ) from None
        if not 0 < n < 65536:
            raise ConfigError(f"controller.quorum.bootstrap.servers entry {item!r} has a bad port")
        out.append((host.strip("[]"), n))
    return tuple(out)


def parse_protocol_map(items: Sequence[str]) -> dict[str, str]:
    """``["CONTROLLER:PLAINTEXT", ...]`` (listener.security.protocol.map)."""
    out = {}
    for item in items:
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL")
        out[name.strip().upper()] = proto
    return out


def parse_listeners(items: Sequence[str], protocols: dict[str, str]) -> tuple[Listener, ...]:
    """``["PLAINTEXT://127.0.0.1:9092", "CONTROLLER://:9093"]`` (listeners, advertised.listeners)."""
    out = []
    for item in items:
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        name = name.strip().upper()
        try:
            if not sep or not colon or not name:
                raise ValueError
            n = int(port)
        except ValueError:
            raise ConfigError(f"listener {item!r} is not NAME://host:port") from None
        if not 0 <= n < 65536:
            raise ConfigError(f"listener {item!r} has a port out of range")
        proto = protocols.get(name, name if name in SECURITY_PROTOCOLS else "")
        if not proto:
            raise ConfigError(
                f"listener {name} has no entry in listener.security.protocol.map and is not named "
                "after a security protocol"
            )
        out.append(Listener(name, host.strip("[]") or "0.0.0.0", n, proto))
    return tuple(out)
