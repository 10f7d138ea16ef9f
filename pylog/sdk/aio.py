"""The SDK's blocking face over asyncio: one daemon thread runs an event loop for all network I/O.

A notebook already runs an event loop in the main thread, so ``asyncio.run`` cannot be used there;
submitting to a loop of our own in another thread works the same in scripts, notebooks and Spark
workers. The thread starts on first use and is re-created after a fork.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

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

            threading.Thread(target=run, name="pylog-sdk-io", daemon=True).start()
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
            future = asyncio.run_coroutine_threadsafe(agen.__anext__(), loop)  # type: ignore[arg-type]
            try:
                item = future.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(aclose(), loop).result()
