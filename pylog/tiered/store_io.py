"""Store I/O off the event loop: a bounded thread pool, a timeout per call and retries with
exponential backoff (the store refusing or timing out a share of requests is normal weather)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.storage.remote_store import RemoteObjectNotFound, RemoteStorageError, RemoteStore

log = logging.getLogger(__name__)
T = TypeVar("T")


class StoreExecutor:
    def __init__(self, store: RemoteStore, *, threads: int, timeout_s: float = 60.0, attempts: int = 4,
                 backoff_s: float = 0.2, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.clock = clock
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pylog-remote")
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.bytes_uploaded = 0
        self.upload_seconds = 0.0

    async def run(self, what: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the pool; RemoteStorageError (or a timeout) is retried, the last one raised."""
        loop = asyncio.get_running_loop()
        delay = self.backoff_s
        for attempt in range(1, self.attempts + 1):
            try:
                return await asyncio.wait_for(loop.run_in_executor(self.pool, fn, *args), self.timeout_s)
            except RemoteObjectNotFound:
                raise
            except (RemoteStorageError, OSError, TimeoutError) as exc:
                if attempt == self.attempts:
                    raise RemoteStorageError(f"{what}: {exc}") from exc
                log.warning("remote tier: %s failed (attempt %d/%d): %s", what, attempt, self.attempts, exc)
                await asyncio.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    async def put_files(self, pairs: list[tuple[str, str]]) -> int:
        """Upload local files to keys, in parallel on the pool, each checked by its stored size
        (a store that mangled a body under a stall is caught and the upload retried); the bytes
        uploaded."""
        def put(key: str, path: str) -> int:
            size = os.path.getsize(path)
            self.store.put_file(key, path)
            self._check_size(key, size)
            return size

        started = self.clock.monotonic_ns()
        sizes = await asyncio.gather(*(self.run(f"upload {k}", put, k, p) for k, p in pairs))
        self.upload_seconds += (self.clock.monotonic_ns() - started) / 1e9
        total = sum(sizes)
        self.bytes_uploaded += total
        return total

    async def put_bytes(self, what: str, key: str, data: bytes) -> None:
        """Write a small object, checked by its stored size, with the retries of ``run``."""
        def put() -> None:
            self.store.put_bytes(key, data)
            self._check_size(key, len(data))

        await self.run(what, put)

    def _check_size(self, key: str, size: int) -> None:
        stored = self.store.size(key)
        if stored != size:
            raise RemoteStorageError(f"{key}: the store holds {stored} bytes, {size} were written")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
