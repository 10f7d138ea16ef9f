"""`cancel_and_wait`: stopping background tasks ends them, and never eats the stopper's own
cancellation."""

from __future__ import annotations

import asyncio

import pytest

from pylog.tasks import cancel_and_wait


def test_a_stopped_task_is_done_and_its_failure_is_dropped() -> None:
    async def main() -> None:
        async def fails_when_cancelled() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                raise RuntimeError("cleanup failed") from None

        tasks = [asyncio.create_task(asyncio.sleep(60)), asyncio.create_task(fails_when_cancelled())]
        await asyncio.sleep(0)
        await cancel_and_wait(tasks)
        assert all(t.done() for t in tasks)

    asyncio.run(main())


def test_a_task_that_swallows_its_cancellation_is_cancelled_again() -> None:
    async def main() -> int:
        swallowed = 0

        async def stubborn() -> None:
            nonlocal swallowed
            while True:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    swallowed += 1
                    if swallowed > 2:
                        raise

        task = asyncio.create_task(stubborn())
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(task), 5)
        assert task.cancelled()
        return swallowed

    assert asyncio.run(main()) == 3


def test_the_callers_own_cancellation_goes_through() -> None:
    async def main() -> None:
        async def slow_to_stop() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                await asyncio.sleep(60)  # still cleaning up when the stopper is cancelled
                raise

        worker = asyncio.create_task(slow_to_stop())
        await asyncio.sleep(0)
        stopper = asyncio.create_task(cancel_and_wait(worker))
        await asyncio.sleep(0.05)
        stopper.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopper
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker

    asyncio.run(main())


def test_nothing_to_stop() -> None:
    asyncio.run(cancel_and_wait(None))
    asyncio.run(cancel_and_wait([]))
