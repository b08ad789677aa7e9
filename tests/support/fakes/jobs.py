"""What a fake scheduler does with a job: run the real runner on its payload, or act out a failure.

The behaviour comes from the run's GPU name, its last dash-separated word, so one catalogue serves every scenario:

    run       execute `python -m runner` on the payload (a real result, a few seconds for identity_py)
    canned    a passing null-harness result after a moment
    slow      a canned result once the test opens the gate (`FakeJobs.gate`), so a dispatcher can be killed meanwhile
    hang      never finishes until cancelled
    lost      the job vanishes from the scheduler shortly after it starts
    noresult  the job ends successfully but leaves no result
    refused   the scheduler refuses the job at submission (each fake answers as its API does)
    ambiguous the first submission starts the job but its answer is lost (a 5xx); the job then ends as `canned`

A payload handed over by reference (a single-use link: services/dispatcher/backends/carry.py) is not opened by the
fake's control plane, which would use the link up: such a job has no `payload` here and always does `run`.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.task.payload import decode_payload
from schemas.contracts import RunPayload
from services.dispatcher.backends.null import null_result

BRIEF_S = 0.2


def behaviour_of(payload: RunPayload | None) -> str:
    return "run" if payload is None else payload.gpu.rsplit("-", 1)[-1]


def is_reference(payload_text: str) -> bool:
    return payload_text.strip().startswith(("https://", "http://"))


def refused(payload_text: str) -> bool:
    return not is_reference(payload_text) and behaviour_of(decode_payload(payload_text)) == "refused"


def answer_lost(job: FakeJob) -> bool:
    """True once per job of the `ambiguous` behaviour: its submission's answer should be a 5xx."""
    if job.behaviour != "ambiguous" or job.answered_badly:
        return False
    job.answered_badly = True
    return True


@dataclass
class FakeJob:
    id: int
    key: str
    payload: RunPayload | None  # None: passed by reference, unread by the fake
    state: str = "running"  # running | done | cancelled
    lost: bool = False
    result: bytes | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    process: subprocess.Popen | None = None
    started_at: float = field(default_factory=time.time)
    answered_badly: bool = False

    @property
    def behaviour(self) -> str:
        return behaviour_of(self.payload)


def run_runner(payload_text: str, *, via_env: bool = False, job: FakeJob | None = None) -> bytes | None:
    """The runner image's entry point (runner.container) on an encoded payload; result.json's bytes."""
    with tempfile.TemporaryDirectory(prefix="kb-fake-job-") as workdir:
        result = Path(workdir) / "result.json"
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
        command = [sys.executable, "-m", "runner.container", "--result", str(result)]
        if via_env:
            env["SUBMISSION_PAYLOAD"] = payload_text
        else:
            payload_file = Path(workdir) / "payload.txt"
            payload_file.write_text(payload_text)
            command[3:3] = ["--payload-file", str(payload_file)]
        process = subprocess.Popen(command, env=env, cwd=workdir, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        if job is not None:
            job.process = process
        process.wait()
        return result.read_bytes() if result.exists() else None


class FakeJobs:
    """The jobs of one fake scheduler: started in threads, each launch and cancellation recorded."""

    def __init__(self, real_work: Callable[[FakeJob, str], bytes | None] | None = None,
                 on_done: Callable[[FakeJob], None] | None = None) -> None:
        self.jobs: dict[int, FakeJob] = {}
        self.launches: list[str] = []  # launch keys, in order
        self.cancellations: list[str] = []
        self.gate = threading.Event()  # what `slow` jobs wait for
        self._ids = itertools.count(1001)
        self._lock = threading.Lock()
        self._real_work = real_work or (lambda job, text: run_runner(text, job=job))
        self._on_done = on_done or (lambda job: None)

    def start(self, payload_text: str, key: str) -> FakeJob:
        payload = None if is_reference(payload_text) else decode_payload(payload_text)
        with self._lock:
            job = FakeJob(next(self._ids), key, payload)
            self.jobs[job.id] = job
            self.launches.append(key)
        threading.Thread(target=self._execute, args=(job, payload_text), daemon=True).start()
        return job

    def record(self, key: str, started_at: float) -> FakeJob:
        """A job that ran and ended before the test began (started at `started_at`, epoch seconds), never run here:
        for listings that hold more than a launch's own job."""
        with self._lock:
            job = FakeJob(next(self._ids), key, None, state="done", started_at=started_at)
            self.jobs[job.id] = job
        return job

    def find(self, job_id: int) -> FakeJob | None:
        job = self.jobs.get(job_id)
        return None if job is None or job.lost else job

    def cancel(self, job: FakeJob) -> None:
        with self._lock:
            if job.state != "running":
                return
            job.state = "cancelled"
            self.cancellations.append(job.key)
        job.cancelled.set()
        if job.process is not None and job.process.poll() is None:
            os.killpg(job.process.pid, 9)

    def launches_of(self, run_id: str) -> list[str]:
        return [key for key in self.launches if key.rsplit(".", 1)[0] == run_id]

    def _execute(self, job: FakeJob, payload_text: str) -> None:
        behaviour = job.behaviour
        if behaviour == "hang":
            job.cancelled.wait()
            return
        while behaviour == "slow" and not self.gate.wait(BRIEF_S) and not job.cancelled.is_set():
            pass
        if job.cancelled.wait(BRIEF_S):
            return
        if behaviour == "lost":
            job.lost = True
            return
        if behaviour == "run":
            result = self._real_work(job, payload_text)
        elif behaviour == "noresult":
            result = None
        else:
            result = null_result(job.payload.mode).model_dump_json().encode()
        with self._lock:
            if job.state != "running":
                return
            job.result = result
            self._on_done(job)  # before the job shows as done
            job.state = "done"
