"""The supervisor's handle on its workers (example harness, docs/authoring.md, "The harness protocol"): start one
worker per rank (forked from the supervisor with torch already imported, or as a fresh interpreter running
harness_worker.py) in a directory holding only the files user code may import, exchange request frames with them,
read their kernel-side CPU clocks, and stop them.

Runs in the supervisor only; hidden from the worker (harness_supervisor.HIDDEN_FROM_WORKER). A forked worker has this
module loaded but never calls into it after `become_worker` hands over to harness_worker.serve.
"""

from __future__ import annotations

import os
import sys
import time

from harness_wire import read_frame, widen_pipe, write_frame
from harness_worker import serve

# The supervisor's clock (no user code runs in this process).
_perf_counter_ns = time.perf_counter_ns
# How long the supervisor waits, after a request, for the ranks to block before it reads their CPU clocks (see
# WorkerGroup.cpu_ns), and how often it looks. A rank still running after that is measured by the wall clock alone.
SETTLE_NS, SETTLE_POLL_S = 20_000_000, 0.00005


class WorkerDied(Exception):
    """The worker exited, or broke the frame protocol (which is how forged output on its pipe ends)."""


class Forked:
    """A worker forked from the supervisor, with the parts of Popen's interface the group uses."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG if deadline is not None else 0)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise TimeoutError(f"worker {self.pid} is still running")
            else:
                time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def become_worker(directory: str, source_dir: str, env: dict, requests: int, replies: int,
                  deferred: bool = False) -> None:
    """The child side of a fork: drop everything of the supervisor that user code must not reach (its file
    descriptors, environment, working directory, import path), then serve. With `deferred`, the submission is
    imported only once the supervisor sends `start` (a worker forked early for a later stage of a chain, eval.py);
    any other frame, or the pipe closing, ends it unused. Never returns."""
    code = 1
    try:
        os.chdir(directory)
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in (0, 1, 2, requests, replies):
                try:
                    os.close(int(name))
                except OSError:
                    pass
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = [directory] + [p for p in sys.path if p and os.path.abspath(p) != source_dir]
        sys.argv = ["harness_worker.py", str(requests), str(replies)]
        import importlib

        importlib.invalidate_caches()
        if deferred:
            try:
                header, _ = read_frame(requests, 0)
            except (EOFError, OSError, ValueError):
                header = {}
            if header.get("kind") != "start":
                code = 0
                return
        code = serve(requests, replies)
    except BaseException:  # noqa: BLE001 - reported on stderr; the supervisor sees the pipe close
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def rank_state(pid: int) -> str | None:
    """The scheduler state of a worker's main thread (R: running), None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


class WorkerGroup:
    """One worker per rank, started in a fresh directory with only the files user code may import.

    With `fork`, the supervisor forks itself (it must not hold a secret yet, and torch must not have touched a GPU)
    so that the worker starts with torch already imported; otherwise each rank is a fresh interpreter. With
    `deferred` (fork only), the forked ranks wait for `start()` before they import the submission."""

    def __init__(self, source_dir: str, hidden: tuple[str, ...], world_size: int = 1, fork: bool = False,
                 deferred: bool = False):
        import shutil
        import socket
        import subprocess
        import tempfile

        self.directory = tempfile.mkdtemp(prefix="kb-worker-")
        for name in os.listdir(source_dir):
            path = os.path.join(source_dir, name)
            if name not in hidden and not name.startswith(".") and os.path.isfile(path):
                shutil.copyfile(path, os.path.join(self.directory, name))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("POPCORN_", "KERNELBOT_"))}
        if world_size > 1:
            with socket.socket() as probe:  # a free port for the ranks' rendezvous
                probe.bind(("127.0.0.1", 0))
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(probe.getsockname()[1]))
            # Inside the runner's network namespace only the loopback exists; the hostname may not resolve to it.
            env.setdefault("GLOO_SOCKET_IFNAME", "lo")
            env.setdefault("NCCL_SOCKET_IFNAME", "lo")
        self.ranks = []
        for rank in range(world_size):
            requests_read, requests_write = os.pipe()
            replies_read, replies_write = os.pipe()
            for fd in (requests_write, replies_write):
                widen_pipe(fd)
            rank_env = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size)}
            if fork:
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    become_worker(self.directory, source_dir, rank_env, requests_read, replies_write, deferred)
                process = Forked(pid)
            else:
                process = subprocess.Popen(
                    [sys.executable, "harness_worker.py", str(requests_read), str(replies_write)],
                    cwd=self.directory, env=rank_env, stdin=subprocess.DEVNULL,
                    pass_fds=(requests_read, replies_write))
            os.close(requests_read)
            os.close(replies_write)
            self.ranks.append((process, requests_write, replies_read, ((~process.pid) << 3) | 2))
        self.deferred = fork and deferred

    def start(self, max_body: int) -> str:
        """Empty once every rank imported the submission, else why not."""
        if self.deferred:
            self.deferred = False
            try:
                for _, requests, _, _ in self.ranks:
                    write_frame(requests, {"kind": "start"})
            except OSError as exc:
                raise WorkerDied(f"the worker exited ({exc})") from exc
        for _, _, replies, _ in self.ranks:
            header, _ = self.receive(replies, max_body)
            if header.get("kind") != "ready":
                return str(header.get("error") or "the worker did not start")
        return ""

    def receive(self, fd: int, max_body: int) -> tuple[dict, bytearray]:
        try:
            return read_frame(fd, max_body)
        except (EOFError, OSError) as exc:
            raise WorkerDied(f"the worker exited ({exc})") from exc
        except ValueError as exc:
            raise WorkerDied(f"worker protocol violation: {exc}") from exc

    def cpu_ns(self) -> int | None:
        """The most CPU time any rank has used (its kernel-side clock, which user code cannot alter), read once every
        rank is blocked again; None where one is not within SETTLE_NS, or its state cannot be read.

        Linux brings a process's CPU clock up to date when the process blocks, and otherwise only at a scheduler
        tick: read while a rank still runs (after its reply it collects garbage, or a patched worker never waits),
        the clock could miss the whole request, and a call hiding milliseconds of work was measured at 0 ns of CPU.
        A reading taken at rest includes what the rank did after its reply, so it can only err on the long side."""
        deadline = _perf_counter_ns() + SETTLE_NS
        while True:
            states = [rank_state(process.pid) for process, _, _, _ in self.ranks]
            if None in states:
                return None
            if "R" not in states:
                break
            if _perf_counter_ns() > deadline:
                return None
            time.sleep(SETTLE_POLL_S)
        try:
            return max(time.clock_gettime_ns(clock) for _, _, _, clock in self.ranks)
        except OSError:
            return None

    def exchange(self, kind: str, frames: list[tuple[dict, bytearray]], max_body: int):
        """Send one request per rank, then collect the replies. Returns (replies, wall ns, worker CPU ns|None)."""
        cpu_before, started = self.cpu_ns(), _perf_counter_ns()
        try:
            for (_, requests, _, _), (header, body) in zip(self.ranks, frames):
                write_frame(requests, {**header, "kind": kind}, body)
        except OSError as exc:
            raise WorkerDied(f"the worker exited ({exc})") from exc
        replies = [self.receive(replies, max_body) for _, _, replies, _ in self.ranks]
        wall, cpu_after = _perf_counter_ns() - started, self.cpu_ns()
        cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        return replies, wall, cpu

    def stop(self) -> None:
        """End every rank (an unstarted deferred one too) and remove the directory; a second call does nothing."""
        import shutil

        ranks, self.ranks = self.ranks, []
        for _process, requests, _replies, _ in ranks:
            try:
                write_frame(requests, {"kind": "exit"})
            except OSError:
                pass
        for process, requests, replies, _ in ranks:
            try:
                process.wait(timeout=2)
            except Exception:  # noqa: BLE001 - a worker that does not leave is killed
                process.kill()
                process.wait()
            os.close(requests)
            os.close(replies)
        shutil.rmtree(self.directory, ignore_errors=True)
