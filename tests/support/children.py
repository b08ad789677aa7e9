"""Processes a test starts, and the two guarantees that they end with it.

1. A child dies with the process that started it. Each child asks the kernel for SIGTERM when its parent dies
   (`PR_SET_PDEATHSIG`), so a test killed mid-run (a timeout, an interrupted worker, a fixture that failed before its
   teardown) leaves nothing running. Linux sends that signal when the *thread* that forked the child ends, not the
   process: a child started from a helper thread (the chaos bench's, say) was stopped the moment that thread
   returned. So every child is forked by one starter thread that lives as long as the process does, whichever thread
   asks for it.
2. A child that outlives its test is found: each carries `SPAWNED_BY` (the pid of the test process) in its
   environment, which survives a re-parenting to init, and tests/conftest.py fails the session for any process that
   is still alive at its end (`leftovers`).
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1
SPAWNED_BY = "KBTEST_SPAWNED_BY"  # not KB_: Platform.env() drops those, and no service reads this one


class _Starter:
    """One thread, alive until the process exits, that forks every child: a child's parent-death signal is tied to
    the thread that forked it, so no other thread's end can stop a child."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        # daemon: it must not hold the interpreter open; it ends with the process, and the children with it
        threading.Thread(target=self._serve, name="child-starter", daemon=True).start()

    def _serve(self) -> None:
        while True:
            make, done = self._jobs.get()
            try:
                done.set_result(make())
            except BaseException as exc:  # noqa: BLE001 - raised again in the thread that asked
                done.set_exception(exc)

    def run(self, make: Callable[[], Any]) -> Any:
        done: Future = Future()
        self._jobs.put((make, done))
        return done.result()


_starter: _Starter | None = None
_starter_lock = threading.Lock()


def _this_process_starter() -> _Starter:
    global _starter
    with _starter_lock:
        if _starter is None or _starter.pid != os.getpid():  # a forked copy of this process has no such thread
            _starter = _Starter()
        return _starter


def _die_with(parent: int) -> Callable[[], None]:
    def arm() -> None:  # in the child, between fork and exec
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took hold: nobody would signal us
            os._exit(1)
    return arm


def spawn(argv: list[str], *, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen:
    """`subprocess.Popen(argv, ...)` for a process that must end with this one, from whichever thread calls it."""
    marked = dict(os.environ if env is None else env)
    marked[SPAWNED_BY] = str(os.getpid())
    parent = os.getpid()
    return _this_process_starter().run(
        lambda: subprocess.Popen(argv, env=marked, preexec_fn=_die_with(parent), **popen))


# ------------------------------------------------------------------------------------------------ leftovers


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process; None when it is gone or a zombie (dead, only not yet reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else (fields[0], int(fields[1]))


def _marked_by(pid: int, owner: int) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{SPAWNED_BY}={owner}".encode() in environ.split(b"\0")


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def leftovers(owner: int | None = None) -> dict[int, str]:
    """Live processes this one started, pid -> command line: its descendants, and whatever carries its mark in its
    environment (a child re-parented to init once its parent died)."""
    owner = os.getpid() if owner is None else owner
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (found := _stat(int(entry))) is not None:
            parents[int(entry)] = found[1]
    found_pids = {pid for pid in parents if pid != owner and _marked_by(pid, owner)}
    frontier = [owner]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in found_pids]
        found_pids.update(children)
        frontier.extend(children)
    found_pids.discard(owner)
    return {pid: _command(pid) for pid in sorted(found_pids)}


def settle_leftovers(grace_s: float = 5.0) -> dict[int, str]:
    """What is still alive after `grace_s` (a child signalled just now may still be exiting); those are killed
    afterwards, so one leak does not load the machine for everything that runs after it."""
    deadline = time.monotonic() + grace_s
    while (alive := leftovers()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return alive
