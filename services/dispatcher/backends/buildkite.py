"""The Buildkite backend: vendor GPUs, one agent per GPU with a queue each (`{vendor}-{gpu}-{index}`).

A run is a build of the runner pipeline (deploy/buildkite/pipeline.yml) with `GPU_QUEUE` (the agent to run on) and
`SUBMISSION_PAYLOAD` (base64 of zlib JSON, or a single-use link to it when too large for an environment variable:
backends/carry.py) in its env, and the launch key in its meta-data, which is how a launch
finds a build it created before. The job reference is `<build number>@<queue>`. The result is the build's
`result.json` artifact. Buildkite's REST API through httpx.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import httpx

from schemas.contracts import RunPayload
from services.dispatcher.backends import http
from services.dispatcher.backends.base import PENDING, JobLost, LaunchError, Outcome
from services.dispatcher.backends.carry import BUILDKITE_INLINE_MAX, PayloadLinks, carried
from services.dispatcher.backends.results import RESULT_FILE, parse_result
from services.dispatcher.catalogue import BuildkiteConfig

log = logging.getLogger("kernelbot.dispatcher.buildkite")

META_KEY = "kernelbot-run"
FINISHED = {"passed", "failed", "canceled", "skipped", "not_run"}
ARTIFACTS_PER_PAGE = 100  # Buildkite's most


class BuildkiteBackend:
    name = "buildkite"

    def __init__(self, config: BuildkiteConfig, queues: tuple[str, ...], token: str | None,
                 poll_interval_s: float, links: PayloadLinks | None = None) -> None:
        self.config = config
        self.links = links
        self.queues = queues
        self.poll_interval_s = poll_interval_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        base = f"{config.api_url.rstrip('/')}/organizations/{config.organization}/pipelines/{config.pipeline}"
        self._http = httpx.AsyncClient(base_url=base, headers=headers, timeout=30, follow_redirects=True)
        self._busy: dict[str, set[str]] = defaultdict(set)  # queue -> builds of ours not yet finished

    async def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        return await http.request(self._http, "Buildkite", method, path, **kwargs)

    def _least_busy_queue(self) -> str:
        return min(self.queues, key=lambda queue: (len(self._busy[queue]), self.queues.index(queue)))

    async def launch(self, payload: RunPayload, launch_key: str) -> str:
        found = await self._request("GET", "/builds", params={f"meta_data[{META_KEY}]": launch_key})
        if found.status_code == 200 and found.json():
            build = found.json()[0]
            return f"{build['number']}@{build.get('env', {}).get('GPU_QUEUE', self.queues[0])}"
        queue = self._least_busy_queue()
        body = {
            "commit": "HEAD", "branch": self.config.branch, "message": f"kernelbot {launch_key}",
            "env": {"GPU_QUEUE": queue, "KERNELBOT_RUN_ID": payload.run_id, "SUBMISSION_PAYLOAD": await carried(
                payload, launch_key, limit=BUILDKITE_INLINE_MAX, links=self.links,
                carrier="a Buildkite environment variable")},
            "meta_data": {META_KEY: launch_key},
        }
        response = await self._request("POST", "/builds", json=body)
        if response.status_code != 201:
            raise LaunchError(f"Buildkite refused the build ({response.status_code}: {response.text[:300]}); check "
                              f"KB_BUILDKITE_TOKEN (write_builds) and pipeline {self.config.pipeline}")
        job_ref = f"{response.json()['number']}@{queue}"
        self._busy[queue].add(job_ref)
        return job_ref

    async def _artifacts(self, number: str) -> list[dict]:
        """Every artifact of a build: the listing comes a page at a time, the next one named in its `Link` header
        (a pipeline may upload logs or traces beside result.json)."""
        found: list[dict] = []
        url: str | None = f"/builds/{number}/artifacts?per_page={ARTIFACTS_PER_PAGE}"
        while url:
            listing = await self._request("GET", url)
            if listing.status_code != 200:
                break
            found += listing.json()
            url = listing.links.get("next", {}).get("url")
        return found

    async def _artifact(self, number: str, where: str) -> Outcome:
        artifact = next((a for a in await self._artifacts(number) if a.get("filename") == RESULT_FILE), None)
        if artifact is None:
            return JobLost("lost", f"{where} left no {RESULT_FILE} artifact; see the build log", retryable=True)
        download = await self._request("GET", artifact["download_url"])
        if download.status_code != 200:
            return JobLost("lost", f"{where}: its {RESULT_FILE} artifact could not be downloaded "
                                   f"({download.status_code})", retryable=True)
        return parse_result(download.content, f"the {RESULT_FILE} artifact of {where}")

    async def poll(self, job_ref: str) -> Outcome:
        number, _, queue = job_ref.partition("@")
        self._busy[queue].add(job_ref)
        response = await self._request("GET", f"/builds/{number}")
        where = f"Buildkite build {number} of {self.config.pipeline} on {queue}"
        if response.status_code == 404:
            self._busy[queue].discard(job_ref)
            return JobLost("lost", f"{where} no longer exists", retryable=True)
        build = response.json()
        if build.get("state") not in FINISHED:
            return PENDING
        self._busy[queue].discard(job_ref)
        if build["state"] in ("canceled", "skipped", "not_run"):
            return JobLost("lost", f"{where} ended {build['state']} outside KernelBot", retryable=True)
        return await self._artifact(number, f"{where} ({build.get('web_url', '')})")

    async def cancel(self, job_ref: str) -> None:
        number, _, queue = job_ref.partition("@")
        self._busy[queue].discard(job_ref)
        response = await self._request("PUT", f"/builds/{number}/cancel")
        if response.status_code not in (200, 422):  # 422: already finished
            log.warning("cancelling Buildkite build %s answered %s", number, response.status_code)
