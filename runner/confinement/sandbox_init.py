"""PID 1 of a run's sandbox (runner/confinement/bwrap.py starts it as `python -I -S -c <this file>` under bwrap
--as-pid-1).

It holds the run's namespaces open for the processes that join them (runner/confinement/confine.py), reaps whatever is
left to it, and takes orders on stdin from the runner, which holds the other end: `k` kills every other process of the
sandbox (the strays a finished stage left: daemons, setsid'd children) and answers `k` on stdout once none is left
running. At end of input (the runner closed the pipe, or died) it exits, and with PID 1 gone the kernel kills
everything else in the namespace. Standard library only; not dumpable, so no process of the sandbox (all the same
uid) may read or write its memory.
"""

import ctypes
import os
import signal
import time

KILL_WAIT_SECONDS = 5.0


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def others_running() -> bool:
    me = str(os.getpid())
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            return True
    return False


def kill_others() -> None:
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process of this PID namespace but ourselves
        except ProcessLookupError:
            pass
        reap()
        if not others_running() or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def main() -> None:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, lambda *_: reap())
    os.write(1, b"r")
    while True:
        try:
            order = os.read(0, 1)
        except InterruptedError:
            continue
        if not order:
            break
        if order == b"k":
            kill_others()
            os.write(1, b"k")
    os._exit(0)


main()
