"""Freed memory goes back to the kernel when the maintenance thread asks (glibc malloc, Arrow pool)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_fragmented_free_memory_is_returned_to_the_kernel() -> None:
    if sys.platform != "linux":
        pytest.fail("this test reads /proc/self/status (Linux)")
    script = textwrap.dedent(
        """
        import pyarrow as pa
        from pylog.broker.memory import release_unused_memory

        def anon_mb():
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon"):
                    return int(line.split()[1]) // 1024

        blocks = [bytes(100_000) for _ in range(3000)]  # 300 MB of cached-batch-sized objects
        keep = blocks[::50]  # a few survivors pin the heap, so malloc cannot shrink it by itself
        del blocks
        arrow = [pa.allocate_buffer(1 << 20) for _ in range(100)]
        del arrow
        held = anon_mb()
        release_unused_memory()
        print(held, anon_mb(), len(keep))
        """
    )
    cmd = [sys.executable, "-c", script]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)
    held, after, _ = map(int, out.stdout.split())
    assert held - after > 200, f"RssAnon {held} MB before the release, {after} MB after"

