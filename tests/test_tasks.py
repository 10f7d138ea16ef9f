"""`cancel_and_wait`: stopping background tasks ends them, and never eats the stopper's own
cancellation; `keep_running`: a long-running loop that fails starts again, and says why."""

from __future__ import annotations

import asyncio

import pytest

from pylog.tasks import cancel_and_wait, keep_running


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


def test_keep_running_starts_a_failed_loop_again_and_logs_why(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []

    async def loop() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise OSError(f"failure {len(runs)}")
        await asyncio.sleep(3600)  # the third run keeps going until cancelled

    async def main() -> None:
        task = asyncio.create_task(keep_running("the test loop", loop, restart_s=0.01))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(runs) == 3:
                break
        assert not task.done()
        await cancel_and_wait(task)
        assert task.cancelled()

    asyncio.run(main())
    assert runs == [0, 1, 2]
    assert caplog.text.count("the test loop failed; starting it again") == 2
    assert "OSError: failure 2" in caplog.text
