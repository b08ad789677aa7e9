"""GitHub failover: a second token (KB_GITHUB_TOKEN_BACKUP, upstream's GITHUB_TOKEN_BACKUP) takes over the calls the
first is rate limited on, against the fake GitHub answering 403 or 429 as GitHub's primary and secondary limits do."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from problems import PROBLEMS_ROOT
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from services.dispatcher.backends import github as github_backend
from services.dispatcher.backends.base import BackendUnavailable, LaunchError
from services.dispatcher.backends.registry import build_lanes
from services.dispatcher.catalogue import build_catalogue
from services.dispatcher.settings import DispatcherSettings
from services.kit.upstream_env import ALIASES
from tests.support.fakes.github import BACKUP_TOKEN, TOKEN, FakeGithub

GPU = "gh-canned"  # the fake's jobs end with a canned result


@pytest.fixture
def fake():
    server = FakeGithub().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.upper().startswith("KB_") or name.upper() in ALIASES.values():
            monkeypatch.delenv(name)


def backend(fake: FakeGithub, settings: DispatcherSettings):
    catalogue = build_catalogue(json.dumps({
        "backends": {"github": {"repository": fake.full_name, "api_url": fake.url, "request_spacing_s": 0,
                                "write_spacing_s": 0}},
        "gpus": {GPU: {"backend": "github", "target": "nvidia_workflow.yml"}}}), {}, [])
    return build_lanes(catalogue, settings)[GPU].backend


def payload(run_id: str):
    problem = load_problem(PROBLEMS_ROOT / "examples" / "identity_py")
    code = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
    return build_payload(problem.task, code, run_id=run_id, gpu=GPU, mode="test", secret=False, seed=None)


def both_tokens() -> DispatcherSettings:
    return DispatcherSettings(github_token=TOKEN, github_token_backup=BACKUP_TOKEN)


@pytest.mark.parametrize(("kind", "status"), [("primary", 403), ("primary", 429), ("secondary", 403),
                                              ("secondary", 429)])
def test_the_backup_token_takes_over_the_calls_the_first_is_rate_limited_on(fake, kind, status):
    github = backend(fake, both_tokens())
    fake.rate_limit(TOKEN, kind, status)
    job_ref = asyncio.run(github.launch(payload(f"fo-{kind}-{status}"), f"fo-{kind}-{status}.1"))
    assert fake.dispatched_with[int(job_ref)] == BACKUP_TOKEN
    refused_calls = fake.calls_by_token[TOKEN]
    assert refused_calls == 1  # one refused call; the limited token then rests
    asyncio.run(github.poll(job_ref))  # polling goes on with the backup, the first token left alone
    assert fake.calls_by_token[TOKEN] == refused_calls and fake.calls_by_token[BACKUP_TOKEN] > 1


def test_the_first_token_serves_again_once_its_limit_has_passed(fake, monkeypatch):
    github = backend(fake, both_tokens())
    fake.rate_limit(TOKEN, "secondary", 429, for_s=30)  # retry-after: 30
    asyncio.run(github.launch(payload("fo-back-1"), "fo-back-1.1"))
    clock = github_backend._now() + 31
    monkeypatch.setattr(github_backend, "_now", lambda: clock)  # 31 s later
    fake.lift_rate_limit(TOKEN)
    job_ref = asyncio.run(github.launch(payload("fo-back-2"), "fo-back-2.1"))
    assert fake.dispatched_with[int(job_ref)] == TOKEN


def test_with_every_token_limited_a_call_is_unavailable_for_now_not_refused(fake):
    github = backend(fake, both_tokens())
    fake.rate_limit(TOKEN, "primary", 403)
    fake.rate_limit(BACKUP_TOKEN, "secondary", 429)
    with pytest.raises(BackendUnavailable, match=r"GitHub rate-limits every token \(2\) until"):
        asyncio.run(github.launch(payload("fo-both"), "fo-both.1"))
    assert fake.jobs.launches == []


def test_a_single_rate_limited_token_waits_too_instead_of_failing_the_launch(fake):
    github = backend(fake, DispatcherSettings(github_token=TOKEN))
    fake.rate_limit(TOKEN, "primary", 403)
    with pytest.raises(BackendUnavailable, match=r"every token \(1\).*KB_GITHUB_TOKEN_BACKUP"):
        asyncio.run(github.launch(payload("fo-one"), "fo-one.1"))


def test_a_refusal_that_is_no_rate_limit_still_refuses_the_launch(fake):
    github = backend(fake, DispatcherSettings(github_token="ghp_wrong", github_token_backup=BACKUP_TOKEN))
    with pytest.raises(LaunchError, match="GitHub answered 401"):
        asyncio.run(github.launch(payload("fo-bad"), "fo-bad.1"))
    assert fake.calls_by_token[BACKUP_TOKEN] == 0  # bad credentials are no reason to switch


def test_upstreams_variable_names_configure_the_failover(fake, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_TOKEN_BACKUP", BACKUP_TOKEN)
    github = backend(fake, DispatcherSettings())
    fake.rate_limit(TOKEN, "primary", 429)
    job_ref = asyncio.run(github.launch(payload("fo-upstream"), "fo-upstream.1"))
    assert fake.dispatched_with[int(job_ref)] == BACKUP_TOKEN


def test_a_call_every_token_is_limited_on_says_when_to_ask_again(fake):
    github = backend(fake, DispatcherSettings(github_token=TOKEN))
    fake.rate_limit(TOKEN, "secondary", 429, for_s=30)  # retry-after: 30
    with pytest.raises(BackendUnavailable) as refused:
        asyncio.run(github.launch(payload("fo-later"), "fo-later.1"))
    assert 28 <= refused.value.retry_after_s <= 30  # the scheduler asks no sooner (tests/backends/test_backend_rate_limits.py)
