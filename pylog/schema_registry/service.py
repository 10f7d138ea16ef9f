"""One broker's registry: the image of ``_schemas`` and the rule for who writes.

Writes go through one writer, the registry of the broker that leads ``_schemas`` partition 0: it
plans against its image under a lock, appends, and answers once its own tail has applied the
records, so ids and versions are allocated once. Every instance announces its URL in ``_schemas``;
the others forward writes to the writer's URL. Reads are served from the local image.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.schema_registry import records
from pylog.schema_registry.core import Plan, RegistryState
from pylog.schema_registry.errors import FORWARDING_ERROR, RegistryError
from pylog.schema_registry.store import KafkaStore


class SchemaRegistry:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        node_id: int,
        url: str = "",
        timeout_s: float = 30.0,
        security: Any = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        self.state = RegistryState()
        self.store = KafkaStore(bootstrap_servers, self.state.apply, timeout_s=timeout_s, security=security,
                                clock=clock)
        self.node_id = node_id
        self.url = url
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        await self.store.start()
        asyncio.get_running_loop().create_task(self._announce())

    async def _announce(self) -> None:
        try:
            await self.store.wait_ready()
            if self.state.instances.get(self.node_id) != self.url:
                value = records.encode_value({"url": self.url})
                await self.store.append([(records.instance_key(self.node_id), value)])
        except Exception:  # retried at the next start; forwarding to this node waits for it
            pass

    async def stop(self) -> None:
        await self.store.stop()

    async def ready(self) -> RegistryState:
        await self.store.wait_ready()
        return self.state

    async def writer_url(self) -> str | None:
        """None when this instance writes, else the URL of the instance that does."""
        await self.store.wait_ready()
        leader = await self.store.leader()
        if leader == self.node_id:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.store.timeout_s
        while (url := self.state.instances.get(leader)) is None:  # the writer announces itself at start
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RegistryError(
                    500,
                    FORWARDING_ERROR,
                    f"the schema registry of broker {leader} (the writer) has not announced itself",
                )
            await self.store.next_advance(remaining)
        return url

    async def write(self, plan: Callable[[RegistryState], Plan]) -> object:
        await self.store.wait_ready()
        async with self._lock:
            p = plan(self.state)
            if p.records:
                last = await self.store.append(p.records)
                await self.store.wait_applied(last)
            return p.result
