"""The GitHub Actions backend, through PyGithub: one `workflow_dispatch` per run on self-hosted GPU runners.

The workflow (deploy/github/) takes the inputs `payload` (base64 of zlib JSON, or a single-use link to it when the
inputs could not hold it: backends/carry.py), `run_id` (the launch key) and,
for a workflow serving several runner kinds, `runner` (the runner label: the GPU's first queue). It names its run
`kernelbot <run_id>`: that name is how a launch finds the run it started, after a restart too. The job reference
is GitHub's run id. The runner's result comes back as the `run-result` artifact, a zip holding result.json.
PyGithub is synchronous; every call runs in a worker thread.

Failover: with a backup token (KB_GITHUB_TOKEN_BACKUP, upstream's GITHUB_TOKEN_BACKUP), a call the first token
gets rate limited on (403 or 429 with `x-ratelimit-remaining: 0` or `retry-after`) is made again with the backup,
and each call uses the first token whose limit has passed. When every token is limited the call fails as
BackendUnavailable, retried later, never as a refused launch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import NoReturn

import requests
from github import Auth, Github, GithubException, RateLimitExceededException, UnknownObjectException
from github.WorkflowRun import WorkflowRun

from schemas.contracts import RunPayload
from services.dispatcher.backends.base import PENDING, BackendUnavailable, JobLost, LaunchError, Outcome
from services.dispatcher.backends.carry import GITHUB_INLINE_MAX, PayloadLinks, carried
from services.dispatcher.backends.results import result_from_zip
from services.dispatcher.catalogue import GithubConfig

log = logging.getLogger("kernelbot.dispatcher.github")

RUN_NAME_PREFIX = "kernelbot "
ARTIFACT = "run-result"
# A run is looked for among those created since shortly before its launch; older runs cannot be ours.
LOOKBACK = timedelta(days=2)
FIND_EVERY_S = 1.0
# How long a rate-limited token rests when GitHub's answer says neither `retry-after` nor `x-ratelimit-reset`.
DEFAULT_REST_S = 60.0


def _now() -> float:
    return time.time()


def rate_limited_until(exc: GithubException, now: float) -> float | None:
    """When a rate-limited token may be used again (epoch seconds), or None when `exc` is no rate limit."""
    if exc.status not in (403, 429):
        return None
    headers = {key.lower(): value for key, value in (exc.headers or {}).items()}
    try:
        if "retry-after" in headers:  # the secondary limit
            return now + float(headers["retry-after"])
        if headers.get("x-ratelimit-remaining") == "0":  # the primary limit
            return float(headers.get("x-ratelimit-reset") or now + DEFAULT_REST_S)
    except ValueError:
        return now + DEFAULT_REST_S
    if exc.status == 429 or isinstance(exc, RateLimitExceededException):
        return now + DEFAULT_REST_S
    return None


def run_name(launch_key: str) -> str:
    return f"{RUN_NAME_PREFIX}{launch_key}"


class GithubBackend:
    name = "github"

    def __init__(self, config: GithubConfig, workflow: str, token: str | None, poll_interval_s: float,
                 runner_label: str | None = None, links: PayloadLinks | None = None,
                 backup_token: str | None = None) -> None:
        self.config = config
        self.links = links
        self.workflow_file = workflow
        self.runner_label = runner_label  # for workflows that serve several runner kinds (AMD: MI300, MI250, ...)
        self.poll_interval_s = poll_interval_s
        tokens = [token] + ([backup_token] if backup_token and backup_token != token else [])
        self._clients = [Github(auth=Auth.Token(t) if t else None, base_url=config.api_url.rstrip("/"), timeout=30,
                                retry=None, seconds_between_requests=config.request_spacing_s,
                                seconds_between_writes=config.write_spacing_s) for t in tokens]
        self._rested_until = [0.0] * len(tokens)  # per token: rate limited until then
        self._repos: dict[int, object] = {}
        self._lock = threading.Lock()
        self._local = threading.local()  # the token index of the call running in this worker thread

    def _usable(self) -> int | None:
        """The first token whose rate limit has passed, or None."""
        now = _now()
        with self._lock:
            return next((i for i, until in enumerate(self._rested_until) if until <= now), None)

    def _rest(self, index: int, until: float) -> None:
        with self._lock:
            self._rested_until[index] = max(self._rested_until[index], until)

    @property
    def _github(self) -> Github:
        return self._clients[getattr(self._local, "index", 0)]

    def _repository(self):
        index = getattr(self._local, "index", 0)
        if index not in self._repos:
            self._repos[index] = self._clients[index].get_repo(self.config.repository)
        return self._repos[index]

    def _with_token(self, index: int, function, *args):
        self._local.index = index
        return function(*args)

    async def _call(self, function, *args):
        while True:
            index = self._usable()
            if index is None:
                resumes = datetime.fromtimestamp(min(self._rested_until), UTC).strftime("%H:%M:%S UTC")
                raise BackendUnavailable(f"GitHub rate-limits every token ({len(self._clients)}) until {resumes}; "
                                         f"KB_GITHUB_TOKEN_BACKUP adds a token that takes over meanwhile",
                                         retry_after_s=max(min(self._rested_until) - _now(), 0.0))
            try:
                return await asyncio.to_thread(self._with_token, index, function, *args)
            except UnknownObjectException:
                raise
            except GithubException as exc:
                now = _now()
                until = rate_limited_until(exc, now)
                if until is None:
                    self._refused(exc)
                until = max(until, now + 1.0)  # a reset already past (clocks differ) still rests the token
                log.warning("GitHub rate-limits token %d of %d until %s", index + 1, len(self._clients),
                            datetime.fromtimestamp(until, UTC).isoformat())
                self._rest(index, until)  # the next usable token, if any, makes the call again
            except requests.RequestException as exc:
                raise BackendUnavailable(f"GitHub is unreachable: {exc}") from exc

    def _refused(self, exc: GithubException) -> NoReturn:
        """A GitHub error that is no rate limit: bad credentials or workflow refuse the launch; the rest pass."""
        if exc.status in (401, 403, 422):
            raise LaunchError(f"GitHub answered {exc.status}: {exc.data}; check KB_GITHUB_TOKEN (it needs "
                              f"actions:write on {self.config.repository}) and the workflow") from exc
        raise BackendUnavailable(f"GitHub answered {exc.status}: {exc.data}") from exc

    # --- launch ------------------------------------------------------------------------------------------------

    def _find_run(self, workflow, launch_key: str) -> WorkflowRun | None:
        since = (datetime.now(UTC) - LOOKBACK).strftime("%Y-%m-%dT%H:%M:%SZ")
        wanted = run_name(launch_key)
        for run in workflow.get_runs(event="workflow_dispatch", created=f">={since}"):
            if run.display_title == wanted:
                return run
        return None

    def _launch_sync(self, payload_text: str, launch_key: str) -> str:
        workflow = self._repository().get_workflow(self.workflow_file)
        existing = self._find_run(workflow, launch_key)
        if existing is not None:
            return str(existing.id)
        inputs = {"payload": payload_text, "run_id": launch_key}
        if self.runner_label:
            inputs["runner"] = self.runner_label
        started = workflow.create_dispatch(self.config.ref, inputs, throw=True, return_run_details=True)
        if isinstance(started, WorkflowRun):
            return str(started.id)
        # A GitHub that does not return run details: the run shows up in the list a moment later.
        deadline = time.monotonic() + self.config.find_run_s
        while time.monotonic() < deadline:
            time.sleep(FIND_EVERY_S)
            found = self._find_run(workflow, launch_key)
            if found is not None:
                return str(found.id)
        raise LaunchError(f"dispatched {self.workflow_file} but no run named {run_name(launch_key)!r} appeared "
                          f"within {self.config.find_run_s:.0f} s; does the workflow set `run-name`?")

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        payload_text = await carried(payload, launch_key, limit=GITHUB_INLINE_MAX, links=self.links,
                                     carrier="GitHub's workflow_dispatch inputs")
        try:
            return await self._call(self._launch_sync, payload_text, launch_key)
        except UnknownObjectException as exc:
            raise LaunchError(f"no workflow {self.workflow_file} in {self.config.repository}: deploy "
                              f"deploy/github/{self.workflow_file} there") from exc

    # --- poll --------------------------------------------------------------------------------------------------

    def _download(self, url: str) -> bytes:
        _, _, chunks = self._github.requester.getStream(url, chunk_size=1 << 16)
        return b"".join(chunks)

    def _poll_sync(self, job_ref: str) -> Outcome:
        run = self._repository().get_workflow_run(int(job_ref))
        if run.status != "completed":
            return PENDING
        where = f"GitHub run {job_ref} ({run.html_url})"
        if run.conclusion == "cancelled":
            return JobLost("lost", f"{where} was cancelled outside KernelBot", retryable=True)
        artifact = next((a for a in run.get_artifacts() if a.name == ARTIFACT), None)
        if artifact is None:
            return JobLost("lost", f"{where} ended {run.conclusion} without a {ARTIFACT} artifact; its log says why",
                           retryable=True)
        return result_from_zip(self._download(artifact.archive_download_url), f"the {ARTIFACT} artifact of {where}")

    async def poll(self, job_ref: str) -> Outcome:
        try:
            return await self._call(self._poll_sync, job_ref)
        except UnknownObjectException:
            return JobLost("lost", f"GitHub run {job_ref} of {self.config.repository} no longer exists",
                           retryable=True)
        except LaunchError as exc:  # credentials went bad mid-run: keep asking until the clock runs out
            raise BackendUnavailable(str(exc)) from exc

    # --- cancel ------------------------------------------------------------------------------------------------

    def _cancel_sync(self, job_ref: str) -> None:
        self._repository().get_workflow_run(int(job_ref)).cancel()

    async def cancel(self, job_ref: str) -> None:
        try:
            await self._call(self._cancel_sync, job_ref)
        except (UnknownObjectException, LaunchError) as exc:
            log.warning("cancelling GitHub run %s: %s", job_ref, exc)
