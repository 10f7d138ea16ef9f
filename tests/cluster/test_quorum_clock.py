"""The quorum reads the clock it is given: monotonic time for the controller's broker sessions,
wall time for what DescribeQuorum reports (when voters and observers were last heard)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pylog.clock import ManualClock
from pylog.cluster.quorum import MetadataQuorum


def test_the_quorum_stamps_with_the_injected_clock(tmp_path: Path) -> None:
    clock = ManualClock(wall_ms=1_000_000, monotonic_ms=50)

    async def main() -> None:
        q = MetadataQuorum(tmp_path, 1, seed=1, fsync=False, clock=clock)
        await q.start()
        try:
            assert q.now_ms() == 50
            q.observer_fetch(7, None, 13, 1 << 20)
            clock.advance(250)
            q.observer_fetch(8, None, 4, 1 << 20)
            assert q.observers() == {7: (None, 12, 1_000_000), 8: (None, 3, 1_000_250)}
            assert q.now_ms() == 300
        finally:
            await q.close()

    asyncio.run(main())
