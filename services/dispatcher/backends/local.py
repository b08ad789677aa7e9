"""The local backend: the runner as a subprocess on this machine, in its own session so it outlives us.

The job reference names the process (pid and start time, so a recycled pid is never mistaken for it) and the run
directory where the runner leaves result.json. A restarted dispatcher finds the process again, or its result.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from schemas.contracts import FullResult, RunPayload
from services.dispatcher.backends.base import JobLost, LaunchError

POLL_S = 0.02
# What a runner inherits: nothing that names a database, a broker or a token.
SAFE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "CUDA_VISIBLE_DEVICES")


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has finished its work
        return None
    return fields[19]


class LocalBackend:
    name = "local"

    def __init__(self, runs_dir: Path) -> None:
        self.runs_dir = runs_dir
        self._children: dict[int, subprocess.Popen] = {}

    async def launch(self, payload: RunPayload) -> str:
        run_dir = self.runs_dir / payload.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "result.json").unlink(missing_ok=True)
        payload_file = run_dir / "payload.json"
        fd = os.open(payload_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold a secret seed
        with os.fdopen(fd, "w") as handle:
            handle.write(payload.model_dump_json())
        env = {k: v for k, v in os.environ.items() if k in SAFE_ENV}
        command = [sys.executable, "-m", "runner", "--payload", str(payload_file), "--result",
                   str(run_dir / "result.json")]
        try:
            with open(run_dir / "runner.log", "ab") as log:
                child = subprocess.Popen(command, stdout=log, stderr=log, env=env, start_new_session=True)
        except OSError as exc:
            raise LaunchError(f"could not start the runner: {exc}") from exc
        self._children[child.pid] = child
        return f"{child.pid}:{_start_time(child.pid)}:{run_dir}"

    def _alive(self, pid: int, started: str) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        return _start_time(pid) == started

    async def wait(self, job_ref: str, timeout_s: float) -> FullResult | JobLost:
        pid_text, started, run_dir = job_ref.split(":", 2)
        pid = int(pid_text)
        deadline = time.monotonic() + timeout_s
        while self._alive(pid, started):
            if time.monotonic() > deadline:
                await self.cancel(job_ref)
                return JobLost("timeout", f"run exceeded its budget of {timeout_s:.0f} s and was cancelled")
            await asyncio.sleep(POLL_S)
        self._children.pop(pid, None)
        result_file = Path(run_dir) / "result.json"
        if not result_file.exists():
            return JobLost("lost", "the runner exited without a result", retryable=True)
        try:
            return FullResult.model_validate(json.loads(result_file.read_text()))
        except ValueError as exc:
            return JobLost("runner_error", f"unreadable result: {exc}", retryable=True)

    async def cancel(self, job_ref: str) -> None:
        pid_text, started, _ = job_ref.split(":", 2)
        pid = int(pid_text)
        if self._alive(pid, started):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        child = self._children.pop(pid, None)
        if child is not None:
            child.wait()
