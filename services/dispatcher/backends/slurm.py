"""The Slurm backend: a batch job per run through slurmrestd, on a GPU partition, over shared storage.

The dispatcher and the cluster's nodes mount the same directory (`shared_dir`). A launch writes the payload there
(mode 0600: it may carry a secret seed) and submits a job named `kernelbot-<launch key>` that runs the runner
(deploy/slurm/); the runner leaves result.json beside it. So the payload never passes through an environment
variable (Linux caps one at 128 KiB) and the result needs no artifact store. The job name is how a launch finds
a job it submitted before; the job reference is Slurm's job id.
"""

from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path

import httpx

from runner.task.payload import encode_payload
from schemas.contracts import RunPayload
from services.dispatcher.backends import http
from services.dispatcher.backends.base import PENDING, BackendUnavailable, JobLost, LaunchError, Outcome
from services.dispatcher.backends.results import RESULT_FILE, parse_result
from services.dispatcher.catalogue import SlurmConfig

log = logging.getLogger("kernelbot.dispatcher.slurm")

JOB_PREFIX = "kernelbot-"
UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
WAITING = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING",
           "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
SCRIPT = """#!/bin/bash
# Submitted by the KernelBot dispatcher; see deploy/slurm/kernelbot-job.sbatch for what a node needs.
set -euo pipefail
cd {run_dir}
exec {command}
"""


def job_name(launch_key: str) -> str:
    return JOB_PREFIX + UNSAFE.sub("_", launch_key)


class SlurmBackend:
    name = "slurm"

    def __init__(self, config: SlurmConfig, partition: str, token: str | None, poll_interval_s: float,
                 max_job_s: int | None = None) -> None:
        self.config = config
        self.partition = partition
        self.poll_interval_s = poll_interval_s
        self.max_job_s = max_job_s
        headers = {"X-SLURM-USER-NAME": config.user}
        if token:
            headers["X-SLURM-USER-TOKEN"] = token
        self._http = httpx.AsyncClient(base_url=f"{config.url.rstrip('/')}/slurm/{config.api_version}",
                                       headers=headers, timeout=30)

    async def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        # slurmrestd answers 500 to a job it refuses or does not know (backends/http.py): an answer, not an outage
        return await http.request(self._http, "slurmrestd", method, path, answers=(500, 501), **kwargs)

    def _run_dir(self, launch_key: str) -> Path:
        return Path(self.config.shared_dir) / UNSAFE.sub("_", launch_key)

    async def _existing(self, name: str) -> str | None:
        response = await self._request("GET", "/jobs")
        if response.status_code != 200:
            raise BackendUnavailable(f"slurmrestd could not list jobs ({response.status_code})")
        for job in response.json().get("jobs", []):
            if job.get("name") == name:
                return str(job["job_id"])
        return None

    def _job(self, launch_key: str, run_dir: Path, payload: RunPayload) -> dict:
        budget = payload.test_timeout + payload.benchmark_timeout + payload.ranked_timeout
        minutes = math.ceil((self.max_job_s or budget + 600) / 60)  # Slurm's own backstop; ours is tighter
        job = {
            "name": job_name(launch_key), "partition": self.partition, "current_working_directory": str(run_dir),
            "standard_output": str(run_dir / "slurm.out"), "standard_error": str(run_dir / "slurm.out"),
            "environment": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"],
            "time_limit": {"set": True, "number": minutes}, "tres_per_node": "gres/gpu:1",
        }
        if self.config.account:
            job["account"] = self.config.account
        return job

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        existing = await self._existing(job_name(launch_key))
        if existing is not None:
            return existing
        run_dir = self._run_dir(launch_key)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / RESULT_FILE).unlink(missing_ok=True)
            fd = os.open(run_dir / "payload.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(encode_payload(payload))
        except OSError as exc:
            raise LaunchError(f"cannot write the payload under {run_dir}: {exc}; is shared_dir mounted?") from exc
        command = self.config.command.format(payload=run_dir / "payload.txt", result=run_dir / RESULT_FILE)
        body = {"script": SCRIPT.format(run_dir=run_dir, command=command),
                "job": self._job(launch_key, run_dir, payload)}
        response = await self._request("POST", "/job/submit", json=body)
        data = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code != 200 or not data.get("job_id"):
            errors = "; ".join(e.get("error", str(e)) for e in data.get("errors", [])) or response.text[:300]
            raise LaunchError(f"slurmrestd refused the job on partition {self.partition}: {errors}")
        return str(data["job_id"])

    async def poll(self, job_ref: str) -> Outcome:
        response = await self._request("GET", f"/job/{job_ref}")
        jobs = response.json().get("jobs", []) if response.status_code == 200 else []
        if not jobs:
            return JobLost("lost", f"Slurm job {job_ref} is unknown to slurmrestd ({response.status_code})",
                           retryable=True)
        job = jobs[0]
        states = set(job.get("job_state") or [])
        if states & WAITING:
            return PENDING
        run_dir = Path(job.get("current_working_directory") or self._run_dir(job["name"][len(JOB_PREFIX):]))
        result_file = run_dir / RESULT_FILE
        where = f"Slurm job {job_ref} ({'/'.join(sorted(states))})"
        try:
            data = result_file.read_bytes()
        except OSError:
            return JobLost("lost", f"{where} left no {result_file}; see {run_dir / 'slurm.out'}", retryable=True)
        return parse_result(data, f"{result_file} of {where}")

    async def cancel(self, job_ref: str) -> None:
        response = await self._request("DELETE", f"/job/{job_ref}")
        if response.status_code != 200:
            log.warning("cancelling Slurm job %s answered %s", job_ref, response.status_code)
