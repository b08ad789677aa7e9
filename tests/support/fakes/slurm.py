"""A fake slurmrestd (v0.0.40 routes): submit, list, query and cancel batch jobs on one GPU partition.

A job really runs its submitted batch script with bash in its working directory (the shared storage) for the
`run` behaviour; for the other behaviours it writes what the runner would have left there, or nothing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from runner.task.payload import decode_payload, encode_payload
from tests.support.fakes.http import FakeServer, Reply, Request
from tests.support.fakes.jobs import FakeJob, FakeJobs, answer_lost, behaviour_of

TOKEN = "slurm-jwt-fake"
USER = "kernelbot"
STATES = {"running": "RUNNING", "done": "COMPLETED", "cancelled": "CANCELLED"}


class FakeSlurm(FakeServer):
    def __init__(self, partitions: tuple[str, ...] = ("gpu",), version: str = "v0.0.40") -> None:
        super().__init__()
        self.partitions = partitions
        self.submitted: dict[int, dict] = {}  # job id -> the submitted job description and script
        self.jobs = FakeJobs(real_work=self._run_script, on_done=self._leave_result)
        base = f"/slurm/{version}"
        self.route("GET", f"{base}/jobs", self._list)
        self.route("POST", f"{base}/job/submit", self._submit)
        self.route("GET", f"{base}/job/(?P<job>\\d+)", self._job)
        self.route("DELETE", f"{base}/job/(?P<job>\\d+)", self._cancel)

    def dispatch(self, request: Request) -> Reply:
        if request.headers.get("x-slurm-user-name") != USER or request.headers.get("x-slurm-user-token") != TOKEN:
            return Reply(401, {"errors": [{"error": "Authentication failure"}]})
        return super().dispatch(request)

    def _run_script(self, job: FakeJob, _payload_text: str) -> bytes | None:
        spec = self.submitted[job.id]
        cwd = Path(spec["job"]["current_working_directory"])
        env = dict(item.split("=", 1) for item in spec["job"].get("environment", []))
        process = subprocess.Popen(["bash", "-c", spec["script"]], cwd=cwd, env=env, start_new_session=True,
                                   stdout=open(cwd / "slurm.out", "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
        job.process = process
        process.wait()
        result = cwd / "result.json"
        return result.read_bytes() if result.exists() else None

    def _leave_result(self, job: FakeJob) -> None:
        if job.behaviour != "run" and job.result is not None:
            cwd = Path(self.submitted[job.id]["job"]["current_working_directory"])
            (cwd / "result.json").write_bytes(job.result)

    def _json(self, job: FakeJob) -> dict:
        spec = self.submitted[job.id]["job"]
        return {"job_id": job.id, "name": spec["name"], "partition": spec["partition"],
                "job_state": [STATES[job.state]], "current_working_directory": spec["current_working_directory"]}

    def _list(self, request: Request) -> Reply:
        jobs = [self._json(job) for job in list(self.jobs.jobs.values())
                if not job.lost and job.id in self.submitted]
        return Reply(200, {"jobs": jobs, "errors": [], "warnings": []})

    def _submit(self, request: Request) -> Reply:
        body = request.json()
        job = body.get("job") or {}
        if job.get("partition") not in self.partitions:
            return Reply(500, {"errors": [{"error_number": 2015, "error": "Invalid partition name specified"}]})
        if not body.get("script", "").startswith("#!") or not job.get("current_working_directory"):
            return Reply(500, {"errors": [{"error": "batch job script and working directory required"}]})
        cwd = Path(job["current_working_directory"])
        payload = decode_payload((cwd / "payload.txt").read_text())
        if behaviour_of(payload) == "refused":
            return Reply(500, {"errors": [{"error_number": 2050, "error": "Job violates accounting/QOS policy"}]})
        key = job["name"].removeprefix("kernelbot-")
        with self.lock:
            started = self.jobs.start(encode_payload(payload), key)
            self.submitted[started.id] = body
        if answer_lost(started):
            return Reply(502, {"errors": [{"error": "slurmctld did not answer in time"}]})
        return Reply(200, {"job_id": started.id, "step_id": "batch", "errors": [], "warnings": []})

    def _job(self, request: Request) -> Reply:
        job = self.jobs.find(int(request.params["job"]))
        if job is None:
            return Reply(500, {"jobs": [], "errors": [{"error_number": 2017, "error": "Invalid job id specified"}]})
        return Reply(200, {"jobs": [self._json(job)], "errors": []})

    def _cancel(self, request: Request) -> Reply:
        job = self.jobs.find(int(request.params["job"]))
        if job is None:
            return Reply(500, {"errors": [{"error": "Invalid job id specified"}]})
        self.jobs.cancel(job)
        return Reply(200, {"errors": []})
