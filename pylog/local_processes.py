"""No broker outlives what started it: the process rules of `LocalBroker`, `LocalCluster` and
``pylog cluster start``.

Each broker runs under a small watchdog (`pylog.local`) that holds a pipe from the starting process.

- The starting process goes away, however (kill -9 included): the pipe closes, the watchdog stops
  the broker (SIGTERM, SIGKILL after 30 s) and exits.
- The watchdog goes away, however: on Linux the kernel sends the broker SIGTERM (``PR_SET_PDEATHSIG``,
  set in the broker's process between fork and exec); elsewhere, and as a second line, the broker
  notices within a second that its parent changed (`exit_with_parent_pid`) and stops.
- The process ids handed out (``LocalNode.pid``, ``LocalBroker.pid``, ``pylog cluster start``'s
  output, the ``*.pid`` files) are the brokers' own, so a signal reaches the broker itself.

``pylog cluster stop DIR`` stops a cluster started in the background from its pid files: the
``pylog cluster start`` process (``cluster.pid``), which stops its nodes as Ctrl-C does, else each
node's broker (``node-N.pid``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pylog.clock import SYSTEM_CLOCK, Clock

CLOCK: Clock = SYSTEM_CLOCK  # the harness's clock: it waits for processes, it keeps no node's time

PARENT_ENV = "PYLOG_EXIT_WITH_PARENT"  # the broker stops when its parent is no longer this pid
CLUSTER_PID_FILE = "cluster.pid"  # the `pylog cluster start` process of a cluster directory
_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` making the child receive `sig` when its parent dies (Linux), or None where the
    kernel offers no such thing. libc is looked up here, in the parent: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), sig)

    return preexec


def exit_with_parent_pid() -> int | None:
    """The parent pid whose disappearance should stop this broker (set by the watchdog), if any."""
    with contextlib.suppress(KeyError, ValueError):
        return int(os.environ[PARENT_ENV])
    return None


def read_pid(path: Path) -> int | None:
    """The pid in `path` if that process still runs pylog (a stale file or a reused pid is None)."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_pylog(pid) else None


def _is_pylog(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():  # no /proc here: the pid is taken at its word
        return True
    with contextlib.suppress(OSError):
        return b"pylog" in cmdline.read_bytes()
    return False


def _gone(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child: reap it
            return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has exited
    return False


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait until none of `pids` runs; the ones still running at `timeout_s`."""
    deadline = CLOCK.monotonic_s() + timeout_s
    left = list(pids)
    while left and CLOCK.monotonic_s() < deadline:
        left = [p for p in left if not _gone(p)]
        if left:
            time.sleep(0.05)
    return [p for p in left if not _gone(p)]


def stop_cluster_dir(home: Path, timeout_s: float = 30.0) -> list[int]:
    """Stop the cluster whose data directory is `home` (SIGTERM, then SIGKILL after `timeout_s`);
    returns the broker pids that were running. Raises FileNotFoundError when `home` holds no cluster."""
    if not home.is_dir() or not any(home.glob("node-*.properties")):
        raise FileNotFoundError(f"{home} holds no pylog cluster (no node-N.properties)")
    brokers = [pid for f in sorted(home.glob("node-*.pid")) if (pid := read_pid(f)) is not None]
    wrapper = read_pid(home / CLUSTER_PID_FILE)
    if wrapper is not None and wrapper != os.getpid():
        with contextlib.suppress(ProcessLookupError):
            os.kill(wrapper, signal.SIGTERM)  # it stops every node, as on Ctrl-C
        wait_gone([wrapper], timeout_s)
    for pid in brokers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # a paused node must run to stop
            os.kill(pid, signal.SIGTERM)
    for pid in wait_gone(brokers, timeout_s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_gone(brokers, 5.0)
    return brokers
