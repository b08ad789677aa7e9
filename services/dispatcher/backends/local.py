"""The local backend: the runner as a subprocess on this machine, in its own session so it outlives us.

Each launch key gets its own directory; the job reference is that directory. Whether the job still runs is read
from the process table (a runner whose command line names the directory's result file), so any dispatcher, after
any restart, finds a live runner again instead of starting a second one into the same directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from schemas.contracts import FullResult, RunPayload
from services.dispatcher.backends.base import PENDING, JobLost, LaunchError, Outcome

POLL_S = 0.05
# What a runner inherits: nothing that names a database, a broker or a token.
SAFE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES")
UNSAFE_KEY = re.compile(r"[^A-Za-z0-9._-]")


def _is_runner(pid: str, wanted: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            if not handle.read().endswith(wanted):
                return False
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # a zombie has finished its work
    except OSError:
        return False  # gone meanwhile


def _runner_pids(result_file: Path, hint: int | None = None) -> list[int]:
    """Live processes whose command line ends with `--result <result_file>`; `hint` is checked first."""
    wanted = f"--result\0{result_file}\0".encode()
    if hint is not None and _is_runner(str(hint), wanted):
        return [hint]
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit() and _is_runner(entry.name, wanted)]


class LocalBackend:
    name = "local"
    poll_interval_s = POLL_S

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._children: dict[str, subprocess.Popen] = {}
        self._adopted: dict[str, int] = {}  # runners started by an earlier dispatcher, by run directory

    def _run_dir(self, launch_key: str) -> Path:
        return self.runs_dir / UNSAFE_KEY.sub("_", launch_key)

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
        env = {k: v for k, v in os.environ.items() if k in SAFE_ENV}
        # --result last: the process table lookup above matches on it.
        command = [sys.executable, "-m", "runner", "--payload", str(payload_file), "--result", str(result_file)]
        try:
            # blocking, briefly: this backend is for development and tests, one spawn per run
            with open(run_dir / "runner.log", "ab") as log:  # noqa: ASYNC230
                child = subprocess.Popen(  # noqa: ASYNC220
                    command, stdout=log, stderr=log, env=env, start_new_session=True)
        except OSError as exc:
            raise LaunchError(f"could not start the runner: {exc}") from exc
        self._children[str(run_dir)] = child
        return str(run_dir)

    def _running(self, run_dir: Path) -> bool:
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
        pids = [child.pid] if child is not None else _runner_pids(run_dir / "result.json")
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)  # the runner leads its session: harness and user code go too
            except ProcessLookupError:
                pass
        if child is not None:
            child.wait()
