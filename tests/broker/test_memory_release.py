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
        from pylog.broker.datapath.memory import release_unused_memory

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


def test_a_serving_process_keeps_freed_buffers_for_reuse() -> None:
    """Megabyte buffers allocated and freed request after request do not fault fresh pages in
    each time once ``keep_freed_memory_for_reuse`` has set glibc's thresholds."""
    if sys.platform != "linux":
        pytest.fail("this test counts page faults with glibc (Linux)")
    script = textwrap.dedent(
        """
        import os, resource, sys
        if sys.argv[1] == "keep":
            from pylog.broker.datapath.memory import keep_freed_memory_for_reuse
            assert keep_freed_memory_for_reuse()
        chunk = os.urandom(1 << 16)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for i in range(300):  # a fetch-sized frame joined from socket reads, a smaller one, both freed
            parts = [chunk] * (16 + i % 16)
            frame = b"".join(parts)
            small = b"".join(parts[:4])
            del frame, small
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        """
    )
    faults = {}
    for mode in ("default", "keep"):
        out = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, timeout=120
        )
        faults[mode] = int(out.stdout)
    assert faults["keep"] * 4 < faults["default"], faults
