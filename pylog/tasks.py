"""Stopping background tasks without swallowing the stopper's own cancellation.

``with suppress(CancelledError): await task`` after ``task.cancel()`` has two traps: if the task
doing the stopping is itself cancelled while it waits, that cancellation is swallowed too; and a
task may swallow its own cancellation (``asyncio.wait_for`` does when the awaited thing finishes
at the same moment, before Python 3.12) and go on looping. Either way a broker never exits.
`cancel_and_wait` waits with ``asyncio.wait`` (which lets the caller's cancellation through) and
cancels again whatever is still running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

RECANCEL_S = 0.2  # how long a cancelled task may take before it is cancelled again


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
