"""The local backend: the runner as a subprocess on this machine, in its own session so it outlives us.

Each launch key gets its own directory; the job reference is that directory. Whether the job still runs is read
from the process table (the pid and start time in the directory's `runner.pid`, else a runner whose command line
names the directory's result file), so any dispatcher, after any restart, finds a live runner again instead of
starting a second one into the same directory.

With `warm`, the backend keeps a warm runner (runner/warm.py) beside it: a fork server with torch and the runner
imported. The runner of a run is forked from it (its modules loaded, the host's system info known), and so are
the harness processes. Such a runner leaves `runner.pid` (pid and start time) in its directory, which is how a
restarted dispatcher finds it again. A launch while the warm runner is not ready yet, or after it died, starts
the runner cold as before; the next launch starts a new warm runner. Runners are watched through a pidfd, so a
run's end is noticed when it happens rather than at the next poll.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from runner.launching.warm_client import WarmUnavailable, fork_runner
from schemas.contracts import FullResult, RunPayload
from services.dispatcher.backends.base import PENDING, JobLost, LaunchError, Outcome

POLL_S = 0.05
# What a runner inherits: nothing that names a database, a broker or a token.
SAFE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES",
            "KB_HARNESS_CHAIN")
UNSAFE_KEY = re.compile(r"[^A-Za-z0-9._-]")
RUNNER_PID_FILE = "runner.pid"


def _is_runner(pid: str, wanted: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            if not handle.read().endswith(wanted):
                return False
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie has finished its work
    except OSError:
        return False  # gone meanwhile


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _leave_pid_file(run_dir: Path, pid: int) -> None:
    """`runner.pid` for a runner started cold, as a forked one leaves it itself. Its command line alone cannot be
    relied on at once: Popen returns once the exec is under way, and until the kernel has laid out the new
    program's arguments /proc/<pid>/cmdline reads empty, so a second launch right then would start a second runner."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            started = handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except OSError:
        return  # already gone: its result, or its absence, says the rest
    temporary = run_dir / f".{RUNNER_PID_FILE}"
    temporary.write_text(f"{pid} {started}\n")
    os.replace(temporary, run_dir / RUNNER_PID_FILE)


def _forked_runner(run_dir: Path) -> int | None:
    """The live runner a warm runner forked for `run_dir`: it leaves `runner.pid` (pid and start time, so a reused
    pid is not mistaken for it) before anything else."""
    try:
        pid, started = (run_dir / RUNNER_PID_FILE).read_text().split()
        with open(f"/proc/{int(pid)}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, ValueError):
        return None
    return int(pid) if fields[19].decode() == started and fields[0] != b"Z" else None


def _runner_pids(result_file: Path, hint: int | None = None) -> list[int]:
    """Live runners of `result_file`'s run: forked by a warm runner, or started with a command line that ends with
    `--result <result_file>`; `hint` is checked first."""
    forked = _forked_runner(result_file.parent)
    if forked is not None:
        return [forked]
    wanted = f"--result\0{result_file}\0".encode()
    if hint is not None and _is_runner(str(hint), wanted):
        return [hint]
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit() and _is_runner(entry.name, wanted)]


class LocalBackend:
    name = "local"
    poll_interval_s = POLL_S

    def __init__(self, runs_dir: Path, warm: bool = False) -> None:
        self.runs_dir = runs_dir
        self._children: dict[str, subprocess.Popen] = {}
        self._adopted: dict[str, int] = {}  # runners started by an earlier dispatcher, by run directory
        self._forked: dict[str, int] = {}  # runners this backend had its warm runner fork, by run directory
        self._warm_enabled = warm
        self._warm: subprocess.Popen | None = None
        self._warm_socket: Path | None = None
        self.warm_socket()  # started now, so that it is ready (torch imported) by the first run

    def _run_dir(self, launch_key: str) -> Path:
        return self.runs_dir / UNSAFE_KEY.sub("_", launch_key)

    def _runner_env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k in SAFE_ENV}

    def warm_socket(self) -> Path | None:
        """The warm runner's socket, (re)starting the warm runner when it is not running."""
        if not self._warm_enabled:
            return None
        if self._warm is None or self._warm.poll() is not None:
            directory = self.runs_dir / ".warm"
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o700)  # only the runner's user reaches the socket
            # A fresh name each time: a server that is shutting down removes its own socket, never a successor's.
            self._warm_socket = directory / f"{uuid.uuid4().hex[:12]}.sock"
            try:
                with open(directory / "warm.log", "ab") as log:
                    self._warm = subprocess.Popen([sys.executable, "-m", "runner.warm", str(self._warm_socket)],
                                                  stdout=log, stderr=log, env=self._runner_env(),
                                                  stdin=subprocess.DEVNULL)
            except OSError:
                self._warm, self._warm_socket = None, None
        return self._warm_socket

    async def close(self) -> None:
        """Stop the warm runner: it finishes the processes it forked for runs still going, then exits."""
        if self._warm is not None and self._warm.poll() is None:
            self._warm.terminate()
        self._warm = None

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        run_dir = self._run_dir(launch_key)
        result_file = run_dir / "result.json"
        if result_file.exists() or _runner_pids(result_file):
            return str(run_dir)  # this attempt was launched before: watch it, never start it twice
        run_dir.mkdir(parents=True, exist_ok=True)
        payload_file = run_dir / "payload.json"
        fd = os.open(payload_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold a secret seed
        with os.fdopen(fd, "w") as handle:
            handle.write(payload.model_dump_json())
        env = self._runner_env()
        warm = self.warm_socket()
        arguments = ["--payload", str(payload_file), "--result", str(result_file)]
        if warm is not None and warm.exists():
            try:
                with open(run_dir / "runner.log", "ab") as log:  # noqa: ASYNC230 - a local file, opened once per run
                    pid = await asyncio.to_thread(fork_runner, warm, arguments, log.fileno())
                self._forked[str(run_dir)] = pid
                return str(run_dir)
            except (WarmUnavailable, OSError):
                pass  # started cold below
        # --result last: the process table lookup above matches on it.
        command = [sys.executable, "-m", "runner", *(["--warm", str(warm)] if warm else []), *arguments]
        try:
            # blocking, briefly: this backend is for development and tests, one spawn per run
            with open(run_dir / "runner.log", "ab") as log:  # noqa: ASYNC230
                child = subprocess.Popen(  # noqa: ASYNC220
                    command, stdout=log, stderr=log, env=env, start_new_session=True)
        except OSError as exc:
            raise LaunchError(f"could not start the runner: {exc}") from exc
        self._children[str(run_dir)] = child
        _leave_pid_file(run_dir, child.pid)
        return str(run_dir)

    def _running(self, run_dir: Path) -> bool:
        forked = self._forked.get(str(run_dir))
        if forked is not None:  # ours: alive until its server reaped it (it may not have left runner.pid yet)
            if _alive(forked):
                return True
            del self._forked[str(run_dir)]
            return False
        child = self._children.get(str(run_dir))
        if child is not None:
            if child.poll() is None:
                return True
            del self._children[str(run_dir)]
            return False
        pids = _runner_pids(run_dir / "result.json", self._adopted.get(str(run_dir)))
        if pids:
            self._adopted[str(run_dir)] = pids[0]
            return True
        self._adopted.pop(str(run_dir), None)
        return False

    async def wait(self, job_ref: str, timeout: float) -> None:
        """Until the runner of `job_ref` ends or `timeout` passes."""
        child = self._children.get(job_ref)
        pid = child.pid if child is not None and child.poll() is None else \
            self._forked.get(job_ref, self._adopted.get(job_ref))
        if pid is None:
            await asyncio.sleep(min(timeout, POLL_S))
            return
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            await asyncio.sleep(min(timeout, POLL_S))
            return
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        loop.add_reader(pidfd, lambda: ended.done() or ended.set_result(None))
        try:
            await asyncio.wait_for(ended, timeout)
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)

    async def poll(self, job_ref: str) -> Outcome:
        run_dir = Path(job_ref)
        if self._running(run_dir):
            return PENDING
        result_file = run_dir / "result.json"
        if not result_file.exists():
            return JobLost("lost", f"the runner in {run_dir} exited without a result; see its runner.log",
                           retryable=True)
        try:
            return FullResult.model_validate(json.loads(result_file.read_text()))
        except ValueError as exc:
            return JobLost("runner_error", f"unreadable result in {run_dir}: {exc}", retryable=True)

    async def cancel(self, job_ref: str) -> None:
        run_dir = Path(job_ref)
        child = self._children.pop(str(run_dir), None)
        forked = self._forked.pop(str(run_dir), None)
        pids = [child.pid] if child is not None else [forked] if forked is not None else \
            _runner_pids(run_dir / "result.json")
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)  # the runner leads its session: harness and user code go too
            except ProcessLookupError:
                pass
        if child is not None:
            child.wait()
