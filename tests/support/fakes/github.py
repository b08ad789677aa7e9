"""A fake of the GitHub REST routes PyGithub calls to dispatch, find, poll, collect and cancel workflow runs.

It accepts two tokens, TOKEN and BACKUP_TOKEN, and can rate-limit either (`rate_limit`) as GitHub does: the primary
limit answers 403 (or 429) with `x-ratelimit-remaining: 0` and the epoch second of `x-ratelimit-reset`, message
"API rate limit exceeded ..."; the secondary limit answers 403 (or 429) with `retry-after` in seconds, message
"You have exceeded a secondary rate limit ...". Every other answer carries the token's `x-ratelimit-*` headers.
`calls_by_token` counts the API calls of each token.

The list of a workflow's runs is GitHub's: newest first, filtered by `event` and by `created` (a date or time
qualifier: `>=`, `>`, `<=`, `<`, `A..B`, `A..*`, or a day), and paginated (`page`, `per_page`, a `Link` header).
`jobs.record` adds runs that ended before the test began, for listings longer than a page or older than a filter.
"""

from __future__ import annotations

import io
import time
import zipfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from tests.support.fakes.http import FakeServer, Reply, Request, page_of
from tests.support.fakes.jobs import FakeJob, FakeJobs, answer_lost, refused

TOKEN = "ghp_fake"
BACKUP_TOKEN = "ghp_fake_backup"
LIMIT = 5000
DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
WORKFLOW_ID = 4242
INPUTS = {"payload", "run_id", "runner"}
# GitHub refuses a workflow_dispatch whose inputs together exceed this many characters.
MAX_INPUTS_CHARS = 65_535


def _instant(text: str, end_of_day: bool = False) -> float:
    """Epoch seconds of a qualifier's date (`2026-11-24`, the whole day) or time (`2026-11-24T10:00:00Z`)."""
    if "T" not in text:
        day = datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()
        return day + 86_400 - 1e-6 if end_of_day else day
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def created_matches(created: float, qualifier: str) -> bool:
    """GitHub's `created` filter of a run created at `created` (epoch seconds)."""
    for operator, test in ((">=", lambda at: created >= _instant(at)), ("<=", lambda at: created <= _instant(at, True)),
                           (">", lambda at: created > _instant(at, True)), ("<", lambda at: created < _instant(at))):
        if qualifier.startswith(operator):
            return test(qualifier[len(operator):])
    if ".." in qualifier:
        low, high = qualifier.split("..", 1)
        return (low == "*" or created >= _instant(low)) and (high == "*" or created <= _instant(high, True))
    return _instant(qualifier) <= created <= _instant(qualifier, True)


def _zip_result(result: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("result.json", result)
    return buffer.getvalue()


@dataclass
class RateLimit:
    kind: str  # "primary" or "secondary"
    status: int  # 403 or 429: GitHub answers either
    until: float  # epoch seconds


class FakeGithub(FakeServer):
    def __init__(self, owner: str = "gpu-mode", repo: str = "runners") -> None:
        super().__init__()
        self.full_name = f"{owner}/{repo}"
        self.jobs = FakeJobs()
        self.workflows: dict[str, int] = {}  # file name -> id
        self.runner_labels: dict[int, str | None] = {}  # run id -> the `runner` input
        self.limits: dict[str, RateLimit] = {}
        self.calls_by_token: Counter[str] = Counter()
        self.dispatched_with: dict[int, str] = {}  # run id -> the token whose call dispatched it
        base = f"/repos/{owner}/{repo}"
        self.base = base
        self.route("GET", base, self._repo)
        self.route("GET", f"{base}/actions/workflows/(?P<workflow>[^/]+)", self._workflow)
        self.route("POST", f"{base}/actions/workflows/(?P<workflow>[^/]+)/dispatches", self._dispatch)
        self.route("GET", f"{base}/actions/workflows/(?P<workflow>[^/]+)/runs", self._runs)
        self.route("GET", f"{base}/actions/runs/(?P<run>\\d+)", self._run)
        self.route("GET", f"{base}/actions/runs/(?P<run>\\d+)/artifacts", self._artifacts)
        self.route("POST", f"{base}/actions/runs/(?P<run>\\d+)/cancel", self._cancel)
        self.route("GET", f"{base}/actions/artifacts/(?P<artifact>\\d+)/zip", self._artifact_zip)
        self.route("GET", "/blobs/(?P<artifact>\\d+).zip", self._blob)

    def rate_limit(self, token: str, kind: str = "primary", status: int = 403, for_s: float = 3600) -> None:
        """From now on `token`'s calls are refused as rate limited, for `for_s` seconds."""
        with self.lock:
            self.limits[token] = RateLimit(kind, status, time.time() + for_s)

    def lift_rate_limit(self, token: str) -> None:
        with self.lock:
            self.limits.pop(token, None)

    def dispatch(self, request: Request) -> Reply:
        if request.path.startswith("/blobs/"):  # artifact storage: a signed URL, no token
            return super().dispatch(request)
        token = request.headers.get("authorization", "").removeprefix("token ")
        if token not in (TOKEN, BACKUP_TOKEN):
            return Reply(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        with self.lock:
            self.calls_by_token[token] += 1
            limit = self.limits.get(token)
            if limit is not None and time.time() >= limit.until:  # the window has passed
                del self.limits[token]
                limit = None
        if limit is not None:
            return self._limited(limit)
        reply = super().dispatch(request)
        reply.headers = {**self._rate_headers(LIMIT - self.calls_by_token[token], time.time() + 3600),
                         **reply.headers}
        return reply

    @staticmethod
    def _rate_headers(remaining: int, reset: float) -> dict[str, str]:
        return {"x-ratelimit-limit": str(LIMIT), "x-ratelimit-remaining": str(max(remaining, 0)),
                "x-ratelimit-used": str(LIMIT - max(remaining, 0)), "x-ratelimit-reset": str(int(reset)),
                "x-ratelimit-resource": "core"}

    def _limited(self, limit: RateLimit) -> Reply:
        if limit.kind == "primary":
            return Reply(limit.status, {"message": "API rate limit exceeded for user ID 1. If you reach out to GitHub "
                                                   "Support for help, please include the request ID.",
                                        "documentation_url": DOCS}, self._rate_headers(0, limit.until))
        headers = self._rate_headers(LIMIT // 2, time.time() + 3600)
        headers["retry-after"] = str(max(1, round(limit.until - time.time())))
        return Reply(limit.status, {"message": "You have exceeded a secondary rate limit. Please wait a few minutes "
                                               "before you try again.", "documentation_url": DOCS}, headers)

    # --- representations ---------------------------------------------------------------------------------------

    def _workflow_json(self, workflow_id: int, file: str) -> dict:
        return {"id": workflow_id, "name": file, "path": f".github/workflows/{file}", "state": "active",
                "url": f"{self.url}{self.base}/actions/workflows/{workflow_id}"}

    def _run_json(self, job: FakeJob) -> dict:
        if job.state == "running":
            status, conclusion = "in_progress", None
        else:
            status = "completed"
            conclusion = {"cancelled": "cancelled"}.get(job.state, "success")
        run_url = f"{self.url}{self.base}/actions/runs/{job.id}"
        return {"id": job.id, "name": "KernelBot NVIDIA runner", "display_title": f"kernelbot {job.key}",
                "event": "workflow_dispatch", "status": status, "conclusion": conclusion, "url": run_url,
                "html_url": f"https://github.com/{self.full_name}/actions/runs/{job.id}",
                "artifacts_url": f"{run_url}/artifacts", "cancel_url": f"{run_url}/cancel",
                "workflow_id": WORKFLOW_ID,
                "created_at": datetime.fromtimestamp(job.started_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}

    def _job(self, request: Request) -> FakeJob | None:
        return self.jobs.find(int(request.params["run"]))

    # --- routes ------------------------------------------------------------------------------------------------

    def _repo(self, request: Request) -> Reply:
        return Reply(200, {"id": 1, "name": self.full_name.split("/")[1], "full_name": self.full_name,
                           "url": f"{self.url}{self.base}", "owner": {"login": self.full_name.split("/")[0]}})

    def _workflow(self, request: Request) -> Reply:
        workflow = request.params["workflow"]
        if workflow.isdigit():
            file = next((f for f, i in self.workflows.items() if i == int(workflow)), None)
            return Reply(200, self._workflow_json(int(workflow), file)) if file else Reply(404, {"message": "x"})
        if not workflow.endswith(".yml"):
            return Reply(404, {"message": "Not Found"})
        self.workflows.setdefault(workflow, WORKFLOW_ID + len(self.workflows))
        return Reply(200, self._workflow_json(self.workflows[workflow], workflow))

    def _dispatch(self, request: Request) -> Reply:
        body = request.json()
        inputs = body.get("inputs") or {}
        if set(inputs) - INPUTS or not all(isinstance(v, str) for v in inputs.values()) or "ref" not in body:
            return Reply(422, {"message": f"Unexpected inputs provided: {sorted(set(inputs) - INPUTS)}"})
        if sum(len(value) for value in inputs.values()) > MAX_INPUTS_CHARS:
            return Reply(422, {"message": f"inputs are too large (more than {MAX_INPUTS_CHARS} characters)"})
        if refused(inputs["payload"]):
            return Reply(422, {"message": "Workflow does not have 'workflow_dispatch' trigger"})
        with self.lock:
            job = self.jobs.start(inputs["payload"], inputs["run_id"])
            self.runner_labels[job.id] = inputs.get("runner")
            self.dispatched_with[job.id] = request.headers["authorization"].removeprefix("token ")
        if answer_lost(job):
            return Reply(502, {"message": "Server Error"})
        if not body.get("return_run_details"):
            return Reply(204)
        run = self._run_json(job)
        return Reply(200, {"workflow_run_id": job.id, "run_url": run["url"], "html_url": run["html_url"]})

    def _runs(self, request: Request) -> Reply:
        jobs = sorted((job for job in list(self.jobs.jobs.values()) if not job.lost),
                      key=lambda job: (job.started_at, job.id), reverse=True)  # newest first, as GitHub lists them
        if request.query.get("created"):
            try:
                jobs = [job for job in jobs if created_matches(job.started_at, request.query["created"])]
            except ValueError:
                return Reply(422, {"message": f"Invalid created qualifier: {request.query['created']}"})
        runs = [self._run_json(job) for job in jobs]
        if request.query.get("event"):
            runs = [r for r in runs if r["event"] == request.query["event"]]
        page, links = page_of(runs, request, self.url)
        return Reply(200, {"total_count": len(runs), "workflow_runs": page}, links)

    def _run(self, request: Request) -> Reply:
        job = self._job(request)
        return Reply(200, self._run_json(job)) if job else Reply(404, {"message": "Not Found"})

    def _artifacts(self, request: Request) -> Reply:
        job = self._job(request)
        if job is None:
            return Reply(404, {"message": "Not Found"})
        artifacts = []
        if job.state == "done" and job.result is not None:
            artifacts.append({"id": job.id, "name": "run-result", "size_in_bytes": len(job.result),
                              "expired": False, "url": f"{self.url}{self.base}/actions/artifacts/{job.id}",
                              "archive_download_url": f"{self.url}{self.base}/actions/artifacts/{job.id}/zip"})
        return Reply(200, {"total_count": len(artifacts), "artifacts": artifacts})

    def _artifact_zip(self, request: Request) -> Reply:
        job = self.jobs.find(int(request.params["artifact"]))
        if job is None or job.result is None:
            return Reply(404, {"message": "Not Found"})
        return Reply(302, None, {"Location": f"{self.url}/blobs/{job.id}.zip"})  # GitHub redirects to storage

    def _blob(self, request: Request) -> Reply:
        job = self.jobs.find(int(request.params["artifact"]))
        if job is None or job.result is None:
            return Reply(404, b"")
        return Reply(200, _zip_result(job.result), {"Content-Type": "application/zip"})

    def _cancel(self, request: Request) -> Reply:
        job = self._job(request)
        if job is None:
            return Reply(404, {"message": "Not Found"})
        if job.state != "running":
            return Reply(409, {"message": "Cannot cancel a workflow run that is completed."})
        self.jobs.cancel(job)
        return Reply(202, {})
