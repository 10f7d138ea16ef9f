"""Background tasks: stopping them without swallowing the stopper's own cancellation, and
keeping a node's long-running loops alive through a failure.

``with suppress(CancelledError): await task`` after ``task.cancel()`` has two traps: if the task
doing the stopping is itself cancelled while it waits, that cancellation is swallowed too; and a
task may swallow its own cancellation (``asyncio.wait_for`` does when the awaited thing finishes
at the same moment, before Python 3.12) and go on looping. Either way a broker never exits.
`cancel_and_wait` waits with ``asyncio.wait`` (which lets the caller's cancellation through) and
cancels again whatever is still running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

log = logging.getLogger(__name__)

RECANCEL_S = 0.2  # how long a cancelled task may take before it is cancelled again
RESTART_S = 1.0  # a loop that failed starts again after this pause


async def cancel_and_wait(tasks: asyncio.Future | Iterable[asyncio.Future] | None) -> None:
    """Cancel ``tasks`` and wait until they are done; their errors are dropped (they were being
    stopped), a cancellation of the caller is not."""
    if tasks is None:
        return
    pending = {tasks} if isinstance(tasks, asyncio.Future) else set(tasks)
    while pending:
        for t in pending:
            t.cancel()
        done, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
        for t in done:
            if not t.cancelled():
                t.exception()  # retrieved: a stopped task's failure is moot


async def keep_running(what: str, loop: Callable[[], Awaitable[None]], restart_s: float = RESTART_S) -> None:
    """Run ``loop`` and start it again whenever it fails, logging the failure; only cancellation
    (or ``loop`` returning) ends it. A loop that died silently would leave the node looking alive
    while it no longer heartbeats or follows the metadata log: nobody awaits such a task before
    it is stopped, so its error would never be seen."""
    while True:
        try:
            await loop()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s failed; starting it again in %gs", what, restart_s)
        await asyncio.sleep(restart_s)
