"""The SDK's blocking face over asyncio: the client's I/O loop thread (`pylog.client.blocking`)."""

from pylog.client.blocking import io_loop, iterate, run

__all__ = ["io_loop", "iterate", "run"]
