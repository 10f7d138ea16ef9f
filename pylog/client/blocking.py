"""The client's blocking face: one daemon thread runs an event loop for all of a process's client
I/O, and ``BlockingClient`` calls a `KafkaClient` living there from ordinary code.

A notebook already runs an event loop in the main thread, so ``asyncio.run`` cannot be used there;
submitting to a loop of our own in another thread works the same in scripts, notebooks, the CLI
and Spark workers. The thread starts on first use and is re-created after a fork.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from pylog.client.cluster import KafkaClient
from pylog.client.metadata import ClusterMetadata, TopicMetadata

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = -1


def io_loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or not _loop.is_running():
            loop = asyncio.new_event_loop()
            started = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(started.set)
                loop.run_forever()

            threading.Thread(target=run, name="pylog-client-io", daemon=True).start()
            started.wait()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the I/O loop and wait for its result (from any thread but the loop's own)."""
    loop = io_loop()
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def iterate(agen: AsyncIterator[T]) -> Iterator[T]:
    """Drive an async iterator living on the I/O loop from synchronous code; closing the iterator
    (or abandoning it) closes the async one, which cancels its work."""
    loop = io_loop()
    try:
        while True:
            # __anext__ is typed as returning an Awaitable; an async generator's (what callers pass)
            # returns a coroutine
            step = cast("Coroutine[Any, Any, T]", agen.__anext__())
            future = asyncio.run_coroutine_threadsafe(step, loop)
            try:
                item = future.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(aclose(), loop).result()


class BlockingClient:
    """A `KafkaClient` on the I/O loop, called from blocking code; a context manager. Connects on
    first use. ``aio`` is the client itself, for coroutines passed to ``run``."""

    def __init__(self, bootstrap_servers: str | Sequence[str], *, client_id: str = "pylog",
                 request_timeout_s: float = 30.0, security: Any = None) -> None:
        self.aio = KafkaClient(bootstrap_servers, client_id=client_id,
                               request_timeout_s=request_timeout_s, security=security)

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` (which may use ``self.aio``) on the I/O loop and wait for it."""
        return run(coro)

    def start(self) -> None:
        run(self.aio.start())

    def version(self, api_key: int, wanted: tuple[int, int] | None = None) -> int:
        self.start()
        return self.aio.version(api_key, wanted)

    def request(self, api_key: int, body: Any, *, node: int | None = None,
                wanted: tuple[int, int] | None = None, timeout_s: float | None = None,
                retry: bool = False) -> Any:
        """One request (see `KafkaClient.request`); the decoded response body."""
        async def go() -> Any:
            await self.aio.start()
            return await self.aio.request(api_key, body, node=node, wanted=wanted, timeout_s=timeout_s,
                                          retry=retry)
        return run(go())

    def metadata(self, topics: list[str] | None = None) -> ClusterMetadata:
        async def go() -> ClusterMetadata:
            await self.aio.start()
            return await self.aio.metadata(topics)
        return run(go())

    def topic(self, topic: str, **kwargs: Any) -> TopicMetadata:
        async def go() -> TopicMetadata:
            await self.aio.start()
            return await self.aio.topic(topic, **kwargs)
        return run(go())

    def coordinator(self, key: str, key_type: int = 0) -> int:
        async def go() -> int:
            await self.aio.start()
            return await self.aio.coordinator(key, key_type)
        return run(go())

    def list_offsets(self, topic: str, leaders: Mapping[int, int], times: Mapping[int, int],
                     **kwargs: Any) -> dict[int, tuple[int, int]]:
        async def go() -> dict[int, tuple[int, int]]:
            await self.aio.start()
            return await self.aio.list_offsets(topic, dict(leaders), dict(times), **kwargs)
        return run(go())

    def close(self) -> None:
        run(self.aio.close())
