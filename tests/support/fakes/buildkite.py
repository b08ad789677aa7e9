"""A fake of Buildkite's REST API (v2) for the runner pipeline: builds, their state, artifacts, cancel.

A build's job is what the pipeline step runs on the agent of `GPU_QUEUE`: deploy/buildkite/run-job.sh, with that
agent's CUDA_VISIBLE_DEVICES (the queue's index) and the build's SUBMISSION_PAYLOAD in its environment, and docker a
stand-in that runs the runner image's entry point (tests/support/fakes/hostbin.py). So a payload too large for an
environment variable fails to start as it would on a real agent, and a payload link is fetched by the step itself.

As Buildkite's REST API does, it lists builds and artifacts a page at a time (`page`, `per_page`, a `Link` header),
and over its rate limit (`rate_limit`) answers 429 with `RateLimit-Remaining: 0` and `RateLimit-Reset`, the seconds
until the window resets. `extra_artifacts` adds files a build uploaded beside result.json (logs, traces).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.fakes.host import REPO, FakeHost
from tests.support.fakes.http import FakeServer, Reply, Request, page_of
from tests.support.fakes.jobs import FakeJob, FakeJobs, answer_lost, refused

STEP = REPO / "deploy" / "buildkite" / "run-job.sh"

TOKEN = "bkua_fake"


class FakeBuildkite(FakeServer):
    def __init__(self, organization: str = "gpu-mode", pipeline: str = "kernelbot-runner") -> None:
        super().__init__()
        self.jobs = FakeJobs(real_work=self._agent_step)
        self.host = FakeHost(Path(tempfile.mkdtemp(prefix="kb-fake-agents-")))
        self.host.local_image("kernelbot-runner:latest", "sha256:fake-runner")
        self.queues: dict[int, str] = {}  # build number -> GPU_QUEUE
        self.meta: dict[int, dict] = {}
        self.extra_artifacts: dict[int, list[str]] = {}  # build number -> files uploaded beside result.json
        self.limited_until = 0.0  # epoch seconds: every API call is answered 429 until then
        self.limited_answers = 0
        base = f"/v2/organizations/{organization}/pipelines/{pipeline}"
        self.base = base
        self.route("GET", f"{base}/builds", self._list)
        self.route("POST", f"{base}/builds", self._create)
        self.route("GET", f"{base}/builds/(?P<number>\\d+)", self._build)
        self.route("PUT", f"{base}/builds/(?P<number>\\d+)/cancel", self._cancel)
        self.route("GET", f"{base}/builds/(?P<number>\\d+)/artifacts", self._artifacts)
        self.route("GET", f"{base}/builds/(?P<number>\\d+)/jobs/(?P<job>[^/]+)/artifacts/(?P<artifact>\\d+)/download",
                   self._download)
        self.route("GET", "/blobs/(?P<artifact>\\d+)/result.json", self._blob)

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.host.root.parent, ignore_errors=True)

    def _agent_step(self, job: FakeJob, payload_text: str) -> bytes | None:
        with self.lock:  # _create records the queue under this lock, before the job can get here
            queue = self.queues.get(job.id, "")
        with tempfile.TemporaryDirectory(prefix="kb-fake-build-") as build:
            env = self.host.env(CUDA_VISIBLE_DEVICES=queue.rsplit("-", 1)[-1], SUBMISSION_PAYLOAD=payload_text)
            try:
                process = subprocess.Popen([str(STEP)], cwd=build, env=env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True)
            except OSError:  # E2BIG: an environment string over 128 KiB; the agent cannot start the job
                return None
            job.process = process
            process.wait()
            result = Path(build) / "result.json"
            return result.read_bytes() if result.exists() else None

    def rate_limit(self, for_s: float) -> None:
        """From now on, for `for_s` seconds, every API call is over the rate limit."""
        with self.lock:
            self.limited_until = time.time() + for_s

    def dispatch(self, request: Request) -> Reply:
        if request.path.startswith("/blobs/"):  # artifact storage: a signed URL, no token, no API limit
            return super().dispatch(request)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return Reply(401, {"message": "Authentication required. Please supply a valid API Access Token"})
        with self.lock:
            reset_s = self.limited_until - time.time()
            if reset_s > 0:
                self.limited_answers += 1
                return Reply(429, {"message": "You have exceeded your API rate limit. Please wait before trying "
                                              "again."},
                             {"RateLimit-Remaining": "0", "RateLimit-Limit": "200",
                              "RateLimit-Reset": str(math.ceil(reset_s))})
        return super().dispatch(request)

    def _json(self, job: FakeJob) -> dict:
        state = {"running": "running", "cancelled": "canceled"}.get(job.state, "passed")
        return {"id": f"build-{job.id}", "number": job.id, "state": state,
                "web_url": f"https://buildkite.com/gpu-mode/kernelbot-runner/builds/{job.id}",
                "env": {"GPU_QUEUE": self.queues.get(job.id, "")}, "meta_data": self.meta.get(job.id, {})}

    def _job(self, request: Request) -> FakeJob | None:
        return self.jobs.find(int(request.params["number"]))

    def _list(self, request: Request) -> Reply:
        with self.lock:
            builds = [self._json(job) for job in list(self.jobs.jobs.values()) if not job.lost]
        for key, value in request.query.items():
            if key.startswith("meta_data[") and key.endswith("]"):
                builds = [b for b in builds if b["meta_data"].get(key[len("meta_data["):-1]) == value]
        page, links = page_of(list(reversed(builds)), request, self.url)
        return Reply(200, page, links)

    def _create(self, request: Request) -> Reply:
        body = request.json()
        env = body.get("env") or {}
        if not body.get("commit") or not body.get("branch") or "GPU_QUEUE" not in env \
                or "SUBMISSION_PAYLOAD" not in env:
            return Reply(422, {"message": "Validation failed: commit, branch, GPU_QUEUE and SUBMISSION_PAYLOAD"})
        if refused(env["SUBMISSION_PAYLOAD"]):
            return Reply(403, {"message": "Forbidden: the API token lacks the write_builds scope"})
        key = (body.get("meta_data") or {}).get("kernelbot-run", "")
        with self.lock:  # the build is listed only once it is complete
            job = self.jobs.start(env["SUBMISSION_PAYLOAD"], key)
            self.queues[job.id] = env["GPU_QUEUE"]
            self.meta[job.id] = body.get("meta_data") or {}
            if answer_lost(job):
                return Reply(502, b"<html>Bad Gateway</html>", {"Content-Type": "text/html"})
            return Reply(201, self._json(job))

    def _build(self, request: Request) -> Reply:
        job = self._job(request)
        return Reply(200, self._json(job)) if job else Reply(404, {"message": "No build found"})

    def _cancel(self, request: Request) -> Reply:
        job = self._job(request)
        if job is None:
            return Reply(404, {"message": "No build found"})
        if job.state != "running":
            return Reply(422, {"message": "Build can't be canceled because it's already finished"})
        self.jobs.cancel(job)
        return Reply(200, self._json(job))

    def _artifacts(self, request: Request) -> Reply:
        job = self._job(request)
        if job is None:
            return Reply(404, {"message": "No build found"})
        if job.state != "done" or job.result is None:
            return Reply(200, [])
        files = [*self.extra_artifacts.get(job.id, []), "result.json"]
        artifacts = [{"id": str(job.id) if name == "result.json" else f"{job.id}-{i}", "job_id": f"job-{job.id}",
                      "path": name, "filename": name, "state": "finished",
                      "file_size": len(job.result) if name == "result.json" else 0,
                      "download_url": f"{self.url}{self.base}/builds/{job.id}/jobs/job-{job.id}/artifacts/"
                                      f"{job.id if name == 'result.json' else 0}/download"}
                     for i, name in enumerate(files)]
        page, links = page_of(artifacts, request, self.url)
        return Reply(200, page, links)

    def _download(self, request: Request) -> Reply:
        return Reply(302, None, {"Location": f"{self.url}/blobs/{request.params['artifact']}/result.json"})

    def _blob(self, request: Request) -> Reply:
        job = self.jobs.find(int(request.params["artifact"]))
        if job is None or job.result is None:
            return Reply(404, b"")
        return Reply(200, job.result)
