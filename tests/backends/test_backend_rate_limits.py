"""Rate limits and paginated listings of the HTTP backends, against the Buildkite fake answering as Buildkite's REST
API does: a 429 says when its window resets (`RateLimit-Reset`), and the scheduler asks no sooner, whether it was
launching or polling; a build's artifacts come a page at a time, and result.json may be on a later page."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from problems import PROBLEMS_ROOT
from runner.task.payload import build_payload
from runner.task.taskfile import load_problem
from schemas.contracts import FullResult, RunPayload
from services.dispatcher.backends.base import BackendUnavailable
from services.dispatcher.backends.buildkite import BuildkiteBackend
from services.dispatcher.catalogue import BuildkiteConfig
from services.dispatcher.repository import ClaimedRun
from services.dispatcher.scheduler import Scheduler
from tests.support.fakes.buildkite import TOKEN, FakeBuildkite

GPU = "bk-canned"  # the fake's jobs end with a canned result
LIMITED_S = 1.0


@pytest.fixture
def fake():
    server = FakeBuildkite().start()
    yield server
    server.stop()


def buildkite(fake: FakeBuildkite) -> BuildkiteBackend:
    config = BuildkiteConfig(organization="gpu-mode", pipeline="kernelbot-runner", api_url=f"{fake.url}/v2")
    return BuildkiteBackend(config, ("nvidia-bk-0",), TOKEN, poll_interval_s=0.05)


def claimed(run_id: str) -> ClaimedRun:
    problem = load_problem(PROBLEMS_ROOT / "examples" / "identity_py")
    code = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()
    payload = build_payload(problem.task, code, run_id=run_id, gpu=GPU, mode="test", secret=False, seed=None)
    return ClaimedRun(run_id=run_id, submission_id=1, gpu=GPU, payload=payload.model_dump(mode="json"), timeout_s=60,
                      status="queued", attempts=1, job_ref=None)


# The scheduler's launch and watch loops, on a stand-in for its state: a backoff far shorter than the limit's window.
SCHEDULER = SimpleNamespace(retry_backoff_s=0.01, _until_next_poll=Scheduler._until_next_poll)


def test_a_rate_limited_answer_says_when_to_ask_again(fake):
    fake.rate_limit(30)
    run = claimed("rl-say")
    with pytest.raises(BackendUnavailable) as refused:
        asyncio.run(buildkite(fake).launch(RunPayload.model_validate(run.payload), "rl-say.1"))
    assert refused.value.retry_after_s == 30 and fake.jobs.launches == []


def test_a_launch_over_the_rate_limit_is_asked_again_once_its_window_resets(fake):
    fake.rate_limit(LIMITED_S)
    run = claimed("rl-launch")
    job_ref = asyncio.run(Scheduler._launch(SCHEDULER, buildkite(fake), RunPayload.model_validate(run.payload), run))
    # asked again no sooner than the reset, so only the first call was refused (three quick tries would all be)
    assert fake.limited_answers == 1 and fake.jobs.launches == ["rl-launch.1"] and job_ref.endswith("@nvidia-bk-0")


async def test_a_poll_over_the_rate_limit_rests_until_the_window_resets(fake):
    backend = buildkite(fake)
    run = claimed("rl-poll")
    job_ref = await backend.launch(RunPayload.model_validate(run.payload), "rl-poll.1")
    fake.rate_limit(LIMITED_S)
    outcome = await Scheduler._watch(SCHEDULER, backend, job_ref, datetime.now(UTC), 60)
    assert isinstance(outcome, FullResult) and outcome.success
    assert fake.limited_answers == 1  # polled every 0.05 s, it would have been refused some 20 times


async def test_result_json_on_a_later_page_of_a_builds_artifacts_is_found(fake):
    backend = buildkite(fake)
    run = claimed("paged-artifacts")
    job_ref = await backend.launch(RunPayload.model_validate(run.payload), "paged-artifacts.1")
    fake.extra_artifacts[int(job_ref.split("@")[0])] = [f"logs/step-{i}.txt" for i in range(150)]
    outcome = await Scheduler._watch(SCHEDULER, backend, job_ref, datetime.now(UTC), 60)
    assert isinstance(outcome, FullResult) and outcome.success, outcome  # result.json was 151st of 151: page 2
