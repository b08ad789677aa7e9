"""How the GitHub backend finds the run a launch started, against the fake's list of a workflow's runs as GitHub
serves it: newest first, filtered by `created`, a page at a time with a `Link` header to the next."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from services.dispatcher.backends.github import LOOKBACK
from services.dispatcher.settings import DispatcherSettings
from tests.backends.test_github_failover import backend, payload
from tests.support.fakes.github import TOKEN, WORKFLOW_ID, FakeGithub


@pytest.fixture
def fake():
    server = FakeGithub().start()
    yield server
    server.stop()


def runs_listings(fake: FakeGithub) -> int:
    return sum(path.endswith("/runs") for method, path in fake.requests if method == "GET")


def test_a_relaunch_finds_its_run_past_the_first_page_and_dispatches_nothing(fake):
    now = time.time()
    own = fake.jobs.record("paged.1", now - 3600)  # launched an hour ago, its answer lost
    for i in range(45):  # then others, listed before it: newest first, 30 a page
        fake.jobs.record(f"other-{i}.1", now - 60 + i)
    github = backend(fake, DispatcherSettings(github_token=TOKEN))

    job_ref = asyncio.run(github.launch(payload("paged"), "paged.1"))

    assert job_ref == str(own.id) and fake.jobs.launches == []
    assert runs_listings(fake) == 2  # the first page did not hold it; the Link header led to the second


def test_a_run_older_than_the_lookback_is_not_taken_for_the_launchs_own(fake):
    old = fake.jobs.record("stale.1", time.time() - LOOKBACK.total_seconds() - 3600)
    github = backend(fake, DispatcherSettings(github_token=TOKEN))

    job_ref = asyncio.run(github.launch(payload("stale"), "stale.1"))

    assert job_ref != str(old.id) and fake.jobs.launches == ["stale.1"]  # the `created` filter left it out


def test_the_fake_lists_runs_as_github_does(fake):
    now = time.time()
    for i in range(5):
        fake.jobs.record(f"listed-{i}.1", now - 86_400 * i)
    url = f"{fake.url}{fake.base}/actions/workflows/{WORKFLOW_ID}/runs"
    headers = {"Authorization": f"token {TOKEN}"}
    first = httpx.get(url, params={"per_page": 2}, headers=headers)
    titles = [run["display_title"] for run in first.json()["workflow_runs"]]
    assert first.json()["total_count"] == 5 and titles == ["kernelbot listed-0.1", "kernelbot listed-1.1"]
    assert 'rel="next"' in first.headers["Link"] and "page=3" in first.headers["Link"]  # the last of three
    last = httpx.get(url, params={"per_page": 2, "page": 3}, headers=headers)
    assert len(last.json()["workflow_runs"]) == 1 and 'rel="next"' not in last.headers["Link"]
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 86_400 * 2.5))
    recent = httpx.get(url, params={"created": f">={since}"}, headers=headers).json()
    assert recent["total_count"] == 3  # runs 0, 1 and 2 were created since
