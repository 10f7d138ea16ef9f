"""Producer ids handed out from blocks the controller reserves in the metadata log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pylog.broker.control.controller_client import ControllerClient

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(
        self,
        controller: ControllerClient,
        node_id: int,
        broker_epoch: Callable[[], int],
        block_size: int = BLOCK_SIZE,
    ) -> None:
        self._controller = controller
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._block_size = block_size
        self._next = 0
        self._end = 0
        self._pending: asyncio.Future | None = None

    def next_now(self) -> int | None:
        """The next id if the current block has one left (no waiting)."""
        if self._next < self._end:
            pid = self._next
            self._next += 1
            return pid
        return None

    async def next(self) -> int:
        while True:
            pid = self.next_now()
            if pid is not None:
                return pid
            if self._pending is None:
                self._pending = asyncio.ensure_future(self._reserve())
            pending = self._pending
            try:
                await asyncio.shield(pending)
            finally:
                if self._pending is pending and pending.done():
                    self._pending = None

    async def _reserve(self) -> None:
        result = await self._controller.allocate_producer_ids(
            self._node_id, self._broker_epoch(), self._block_size
        )
        if result.error_code:
            raise RuntimeError(f"no producer ids: {result.error_message}")
        self._next, self._end = result.first_producer_id, result.first_producer_id + result.count
