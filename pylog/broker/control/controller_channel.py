"""``ControllerChannel``: requests to the active controller, wherever it runs.

The controller's API is its listener's handler table. When this node is the active controller
the request runs through that same table in-process (encoded and decoded as on the wire, so
both paths behave alike); otherwise it goes over the network to the active controller's
controller listener. Either way the caller gets a decoded response. A request that meets no
controller (an election under way, a partition, a controller that answers NOT_CONTROLLER) is
retried against whoever leads next until its deadline.

A client's admin request forwarded by a broker keeps its client: in-process it runs with the
client's principal, over the network it travels in an Envelope (Kafka's forwarding), so the
controller authorizes the client. This node's own requests (registration, heartbeats, ...) run
as the node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pylog.protocol import api
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import ErrorResponse, HandlerSpec, HandlerTable
from pylog.client.protocol import Channel
from pylog.cluster.channel import ChannelError, node_channel
from pylog.cluster.quorum_addresses import QuorumAddresses
from pylog.security.client import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

RETRY_S = 0.05


class ControllerUnavailable(ChannelError):
    """No controller answered before the deadline."""


async def call_table(
    table: HandlerTable,
    api_key: int,
    version: int,
    body: Any,
    client_id: str,
    caller: RequestContext | None = None,
) -> Any:
    """Run one request through ``table`` in-process, with the wire's encoding on both sides, as
    ``caller`` (a client whose request is forwarded) or else as this node."""
    frame = api.encode_request(api_key, version, 0, client_id, body)
    request = api.decode_request(memoryview(frame)[4:])
    spec = table.lookup(api_key)
    if spec is None:
        raise ControllerUnavailable(f"api {api_key} is not served by the controller")
    if caller is None:
        ctx = RequestContext(api_key, version, 0, client_id, "local", "CONTROLLER", internal=True)
    else:
        ctx = RequestContext(
            api_key,
            version,
            0,
            caller.client_id,
            caller.client_host,
            caller.listener,
            caller.principal,
            caller.security_protocol,
        )
    result = spec.fn(ctx, request.body)
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        result = await result
    out = api.encode_response(api_key, version, 0, result)
    return api.decode_response(api_key, version, memoryview(out)[4:])[1]


def has_error(body: Any, code: int) -> bool:
    """Whether any ``error_code`` in a decoded response equals ``code``."""
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        fields = getattr(node, "_fields", None)
        if fields is None:
            continue
        for name in fields:
            value = getattr(node, name)
            if name == "error_code" and value == code:
                return True
            if isinstance(value, list) or hasattr(value, "_fields"):
                stack.append(value)
    return False


class ControllerChannel:
    def __init__(
        self,
        node_id: int,
        *,
        addresses: QuorumAddresses,
        leader_hint: Callable[[], int | None],
        local: Callable[[], HandlerTable | None],
        request_timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.security = security
        self.addresses = addresses
        self._leader_hint = leader_hint
        self._local = local
        self.request_timeout_s = request_timeout_s
        self._client_id = f"pylog-node-{node_id}"
        self._channels: dict[tuple[str, int], Channel] = {}
        self._last_leader: int | None = None

    def _channel(self, voter: int) -> Channel:
        address = self.addresses.address(voter)
        assert address is not None
        ch = self._channels.get(address)
        if ch is None:
            ch = self._channels[address] = node_channel(
                address[0], address[1], client_id=self._client_id, security=self.security
            )
        return ch

    def _next(self) -> int | None:
        return self.addresses.next_candidate()

    def _target(self) -> int | None:
        hint = self._leader_hint()
        if hint is not None and (hint == self.node_id or self.addresses.address(hint) is not None):
            return hint
        if self._last_leader is not None:
            return self._last_leader
        return self._next()

    async def call(
        self,
        api_key: int,
        version: int,
        body: Any,
        *,
        timeout_s: float | None = None,
        caller: RequestContext | None = None,
        error_response: ErrorResponse | None = None,
    ) -> Any:
        """The active controller's response; raises ControllerUnavailable past the deadline.
        ``caller``: the client a forwarded request runs as (else this node); ``error_response``:
        the API's answer when the controller refuses the Envelope that carries it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_s if timeout_s is not None else self.request_timeout_s)
        last_error = "no controller known"
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ControllerUnavailable(f"no active controller answered: {last_error}")
            target = self._target()
            response = None
            if target == self.node_id:
                table = self._local()
                if table is not None:
                    response = await call_table(table, api_key, version, body, self._client_id, caller)
                else:
                    last_error = "this node is not a controller"
            elif target is not None and self.addresses.address(target) is not None:
                try:
                    channel = self._channel(target)
                    if caller is None:
                        response = await channel.request(api_key, version, body, min(remaining, 5.0))
                    else:
                        response = await self._enveloped(
                            channel, caller, body, min(remaining, 5.0), error_response
                        )
                except ChannelError as exc:
                    last_error = str(exc)
                    if self._last_leader == target:
                        self._last_leader = None
                    if self._leader_hint() is None:
                        self._last_leader = self._next()
            if response is not None:
                if not has_error(response, ErrorCode.NOT_CONTROLLER):
                    self._last_leader = target
                    return response
                last_error = f"node {target} is not the active controller"
                if self._last_leader == target:
                    self._last_leader = None
                if self._leader_hint() in (None, target):
                    self._last_leader = self._next()
            await asyncio.sleep(min(RETRY_S, max(deadline - loop.time(), 0)))

    async def _enveloped(
        self,
        channel: Channel,
        caller: RequestContext,
        body: Any,
        timeout_s: float,
        error_response: ErrorResponse | None,
    ) -> Any:
        from pylog.broker.handlers.envelope import envelope_request

        wrapped = await channel.request(
            ApiKey.ENVELOPE, 0, envelope_request(caller, body, self._client_id), timeout_s
        )
        key, version = caller.api_key, caller.api_version
        if wrapped.error_code or wrapped.response_data is None:
            code = wrapped.error_code or ErrorCode.UNKNOWN_SERVER_ERROR
            if code != ErrorCode.NOT_CONTROLLER:  # NOT_CONTROLLER: the caller retries elsewhere
                log.error(
                    "the controller refused to run api %s for %s: error %s (is this node's principal in "
                    "super.users?)",
                    key,
                    caller.principal,
                    code,
                )
            if error_response is None:
                raise ChannelError(f"envelope refused with error {code}")
            return error_response(body, code)
        return api.decode_response(key, version, memoryview(bytes(wrapped.response_data)))[1]

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()


def forwarded(fn: Any, channel: ControllerChannel) -> HandlerSpec:
    """A broker-listener entry for controller API ``fn``: the request is sent to the active
    controller and its answer relayed (REQUEST_TIMED_OUT when none answers in time)."""
    lo, hi = fn.versions

    async def forward(ctx: RequestContext, req: Any) -> Any:
        try:
            return await channel.call(
                ctx.api_key, ctx.api_version, req, caller=ctx, error_response=fn.error_response
            )
        except ControllerUnavailable as exc:
            log.warning("forwarding %s: %s", fn.api_name, exc)
            if fn.error_response is None:
                raise
            return fn.error_response(req, ErrorCode.REQUEST_TIMED_OUT)

    return HandlerSpec(fn.api_key, lo, hi, forward, fn.api_name, fn.error_response)
