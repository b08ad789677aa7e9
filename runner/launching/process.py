"""Running one harness (or warm-up / compiler) process with its output drained while it runs.

All pipes (stdout, stderr, the POPCORN_FD result pipe and the POPCORN_DATA_FD bulk pipe) are read concurrently
with a selector, so a child writing more than the 64 KiB pipe buffer never deadlocks (upstream read the result pipe
only after exit). The child runs in its own session/process group; on timeout, and after a normal exit to reap
stragglers, the whole group is killed. Confinement (limits, namespaces, uid) is runner/confinement/sandbox.py's, applied
by wrapping argv.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CAPTURE_LIMIT = 1 << 20  # stdout/stderr: far beyond the 16 KiB that is kept after truncation
RESULT_LIMIT = 4 << 20
DATA_LIMIT = 16 << 20
# How long we keep reading after the child exited or was killed: a descendant that escaped the process group
# (setsid) could hold the pipes open forever, and must not hang the runner.
DRAIN_GRACE_SECONDS = 2.0


@dataclass
class CapturedStream:
    """Bytes read from one pipe, kept up to `limit`; beyond it only newlines are counted (for `N lines omitted`)."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    dropped_lines: int = 0
    overflowed: bool = False
    first_at: float | None = None  # time.monotonic() of the first and the last chunk read
    last_at: float | None = None

    def feed(self, chunk: bytes) -> None:
        self.last_at = time.monotonic()
        if self.first_at is None:
            self.first_at = self.last_at
        room = self.limit - len(self.data)
        self.data += chunk[:room]
        if len(chunk) > room:
            self.overflowed = True
            self.dropped_lines += chunk.count(b"\n", room)


@dataclass
class ProcessOutcome:
    exit_code: int
    duration: float
    timed_out: bool
    stdout: CapturedStream
    stderr: CapturedStream
    result: CapturedStream
    data: CapturedStream
    started_at: float = 0.0  # time.monotonic() when the process was started
    forked: bool = False  # forked from a warm runner rather than started cold
    chained: bool = False  # a later stage of a chain, run by the process of the run's first stage


def run_process(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    timeout: float,
    with_result_pipes: bool = True,
    reap: Callable[[], None] | None = None,
    launch: Callable[..., Any] | None = None,
) -> ProcessOutcome:
    """Run `argv` in its own process group; with `with_result_pipes`, export POPCORN_FD and POPCORN_DATA_FD.

    `reap` runs after the group kill, for stragglers the group kill cannot reach (a sandbox kills its uid).
    `launch` starts the process instead of Popen (the warm runner's fork, runner/launching/warm_client.py): it is called
    as `launch(argv, cwd=, env=, pass_fds=, stdout=, stderr=)` and returns a handle with `pid`, `exit_fd`, `wait()`,
    `release()`; the child must lead its own session.
    Raises FileNotFoundError when the program does not exist (callers decide what that means).
    """
    env = dict(env)
    streams = {name: CapturedStream(limit) for name, limit in
               (("stdout", CAPTURE_LIMIT), ("stderr", CAPTURE_LIMIT), ("result", RESULT_LIMIT), ("data", DATA_LIMIT))}
    read_ends: dict[int, str] = {}
    child_ends: list[int] = []
    try:
        if with_result_pipes:
            for name, variable in (("result", "POPCORN_FD"), ("data", "POPCORN_DATA_FD")):
                read_end, write_end = os.pipe()
                read_ends[read_end] = name
                child_ends.append(write_end)
                env[variable] = str(write_end)
        if launch is not None:
            for name in ("stdout", "stderr"):
                read_end, write_end = os.pipe()
                read_ends[read_end] = name
                child_ends.append(write_end)
        start = time.monotonic()
        proc: Any  # a Popen, or the warm runner's handle (runner/launching/warm_client.py)
        if launch is None:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=tuple(child_ends), start_new_session=True,
            )
        else:
            *passed, stdout_end, stderr_end = child_ends
            proc = launch(argv, cwd=cwd, env=env, pass_fds=tuple(passed), stdout=stdout_end, stderr=stderr_end)
    except BaseException:
        for fd in [*read_ends, *child_ends]:
            os.close(fd)
        raise
    for fd in child_ends:  # only the child may hold the write ends, so EOF means "all writers gone"
        os.close(fd)
    if launch is None:
        read_ends[proc.stdout.fileno()] = "stdout"
        read_ends[proc.stderr.fileno()] = "stderr"
    try:
        timed_out, duration = _pump(proc, read_ends, streams, start, timeout, reap)
    finally:
        kill_group(proc)
        proc.wait()
        for fd, name in read_ends.items():
            if launch is not None or name in ("result", "data"):
                close_quietly(fd)
        if launch is None:
            proc.stdout.close()
            proc.stderr.close()
        else:
            proc.release()
    return ProcessOutcome(
        exit_code=114 if timed_out else proc.returncode,
        duration=timeout if timed_out else duration,
        timed_out=timed_out,
        started_at=start,
        forked=launch is not None,
        stdout=streams["stdout"],
        stderr=streams["stderr"],
        result=streams["result"],
        data=streams["data"],
    )


def _pump(proc: Any, read_ends: dict[int, str], streams: dict[str, CapturedStream],
          start: float, timeout: float, reap: Callable[[], None] | None) -> tuple[bool, float]:
    """Read every pipe until EOF while watching the child's exit and the deadline. Returns (timed_out, duration)."""
    selector = selectors.DefaultSelector()
    for fd in read_ends:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ, read_ends[fd])
    forked = hasattr(proc, "exit_fd")  # the warm runner's child: it says when it ended
    exit_fd = proc.exit_fd if forked else open_pidfd(proc.pid)
    if exit_fd is not None:
        selector.register(exit_fd, selectors.EVENT_READ, "exit")
    deadline = start + timeout
    open_pipes = set(read_ends)
    ended_at: float | None = None  # when the child exited or was killed
    timed_out = False
    try:
        while True:
            now = time.monotonic()
            if ended_at is None and exit_fd is None and has_exited(proc.pid):
                ended_at = now
                kill_group(proc, reap)  # stragglers, as below
            if ended_at is None and now >= deadline:
                timed_out, ended_at = True, now
                kill_group(proc, reap)
            if ended_at is not None:
                if not open_pipes or now >= ended_at + DRAIN_GRACE_SECONDS:
                    break
                wait = ended_at + DRAIN_GRACE_SECONDS - now
            else:
                wait = deadline - now if exit_fd is not None else min(deadline - now, 0.05)
            for key, _ in selector.select(max(wait, 0.0)):
                if key.data == "exit":
                    selector.unregister(key.fd)
                    if ended_at is None:  # not when the exit is the one our timeout kill caused
                        ended_at = time.monotonic()
                        kill_group(proc, reap)  # stragglers: daemons left behind by the harness or user code
                    continue
                chunk = read_chunk(key.fd)
                if chunk is None:
                    continue
                if chunk:
                    streams[key.data].feed(chunk)
                else:
                    selector.unregister(key.fd)
                    open_pipes.discard(key.fd)
    finally:
        selector.close()
        if exit_fd is not None and not forked:
            close_quietly(exit_fd)
    return timed_out, (ended_at or time.monotonic()) - start


def read_chunk(fd: int) -> bytes | None:
    """The next bytes of a pipe, b"" at EOF, None when a wake-up found nothing to read yet."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def has_exited(pid: int) -> bool:
    # WNOWAIT leaves the child a zombie, so its pid (= our process group id) cannot be reused before we kill the group.
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def kill_group(proc: subprocess.Popen, reap: Callable[[], None] | None = None) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if reap is not None:
        reap()


def close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
