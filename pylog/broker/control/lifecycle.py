"""``BrokerLifecycle``: this broker's registration with the controller and its heartbeats.

A broker registers (retrying until a controller answers, and while a previous incarnation's
session is still alive: DUPLICATE_BROKER_REGISTRATION), then heartbeats every
``broker.heartbeat.interval.ms``, asking to stay fenced until the node says it is ready (its
image caught up past its own registration and its logs open). The controller's answers drive the
state: unfenced means clients may be served; a stale epoch or a lost registration (a controller
that took over without it) means registering again. ``controlled_shutdown`` asks the controller
to move leadership away and returns once it says the broker may exit (or the time is up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence

from pylog.protocol.errors import ErrorCode

from pylog.broker.control.controller_channel import ControllerUnavailable
from pylog.broker.control.controller_client import ControllerClient
from pylog.cluster.node_config import Listener
from pylog.tasks import cancel_and_wait, keep_running

log = logging.getLogger(__name__)

RETRY_S = 0.1


class BrokerLifecycle:
    def __init__(
        self,
        client: ControllerClient,
        node_id: int,
        listeners: Sequence[Listener],
        *,
        rack: str | None,
        heartbeat_interval_s: float,
        metadata_offset: Callable[[], int],
    ) -> None:
        self.client = client
        self.node_id = node_id
        self.listeners = tuple(listeners)
        self.rack = rack
        self.heartbeat_interval_s = heartbeat_interval_s
        self._metadata_offset = metadata_offset
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.ready = False  # the node may be unfenced (image caught up, logs open)
        self._want_shutdown = False
        self._unreachable_while_stopping = 0
        self._unfenced = asyncio.Event()
        self._shutdown_done = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def register(self) -> int:
        """Register, retrying until the controller accepts; returns the broker epoch."""
        reported: int | None = None
        while True:
            try:
                error, epoch = await self.client.register_broker(
                    self.node_id, self.incarnation_id, self.listeners, self.rack
                )
            except ControllerUnavailable as exc:
                error, epoch = ErrorCode.REQUEST_TIMED_OUT, -1
                log.debug("registration: %s", exc)
            if error == ErrorCode.NONE:
                self.broker_epoch = epoch
                log.info("registered broker %d with epoch %d", self.node_id, epoch)
                return epoch
            if error != reported:
                reported = error
                if error == ErrorCode.DUPLICATE_BROKER_REGISTRATION:
                    log.warning(
                        "node id %d is still registered by a previous incarnation; waiting for its session "
                        "to expire",
                        self.node_id,
                    )
                elif error == ErrorCode.INCONSISTENT_CLUSTER_ID:
                    raise RuntimeError(
                        f"the controller belongs to another cluster than this node's {self.client.cluster_id}"
                    )
                elif error != ErrorCode.REQUEST_TIMED_OUT:
                    log.warning("registration refused: %s", ErrorCode(error).name)
            await asyncio.sleep(RETRY_S)

    def start(self) -> None:
        self._task = asyncio.create_task(
            keep_running("broker heartbeats", self._heartbeats), name=f"broker-heartbeat-{self.node_id}"
        )

    def set_ready(self) -> None:
        """The node has caught up and opened its logs: it may be unfenced now."""
        self.ready = True
        self._wake.set()

    async def wait_unfenced(self) -> None:
        await self._unfenced.wait()

    async def _heartbeats(self) -> None:
        while True:
            try:
                answer = await self.client.heartbeat(
                    self.node_id,
                    self.broker_epoch,
                    self._metadata_offset(),
                    want_fence=not self.ready,
                    want_shutdown=self._want_shutdown,
                    timeout_s=max(self.heartbeat_interval_s, 1.0),
                )
            except ControllerUnavailable as exc:
                log.debug("heartbeat: %s", exc)
                answer = None
                if self._want_shutdown:
                    self._unreachable_while_stopping += 1
                    if self._unreachable_while_stopping == 2:
                        log.warning("no controller to hand leadership to; shutting down without it")
                        self._shutdown_done.set()
            if answer is not None:
                if answer.error_code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
                    log.warning("controller lost this broker's registration; registering again")
                    await self.register()
                    continue
                if answer.error_code == ErrorCode.NONE:
                    self._on_answer(answer.is_fenced, answer.should_shut_down)
            interval = (
                RETRY_S if self._want_shutdown or (self.ready and self.fenced) else self.heartbeat_interval_s
            )
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    def _on_answer(self, fenced: bool, should_shut_down: bool) -> None:
        if fenced != self.fenced:
            log.info("broker %d is %s", self.node_id, "fenced" if fenced else "unfenced")
        self.fenced = fenced
        if not fenced:
            self._unfenced.set()
        else:
            self._unfenced.clear()
        if should_shut_down:
            self._shutdown_done.set()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away; True once it let this broker go."""
        if self._task is None or self.broker_epoch < 0:
            return False
        self._want_shutdown = True
        self._wake.set()
        try:
            await asyncio.wait_for(self._shutdown_done.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            log.warning("controlled shutdown did not finish in %.1fs", timeout_s)
            return False

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
