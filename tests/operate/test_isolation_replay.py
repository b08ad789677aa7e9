"""The isolation rule over recorded history, end to end: results from before runners reported a level keep their
rank, a limits-only result stays off the board, and neither a replay of the log nor a rescore in the same mode
changes that; a rescore in development mode ranks what was refused, recorded as a revision."""

from __future__ import annotations

import asyncio

import pytest

from problems import PROBLEMS_ROOT
from schemas.contracts import FullResult, SystemInfo
from schemas.events import RunCompleted
from services.kit.bus import publish_all
from tests.operate.conftest import GPU, mean_board, ranked_users, run_cli, stage
from tests.operate.test_rejudge_replay import assert_same, dump, wait_projected
from tests.support.events import archived
from tests.support.in_process import InProcessPlatform
from tests.support.platform import Platform

CODE = (PROBLEMS_ROOT / "examples" / "identity_py" / "submission.py").read_text()


@pytest.fixture
def platform(nats_url, database_url, tmp_path):
    running = InProcessPlatform(nats_url, database_url, tmp_path, local_gpus={"cpu": 1},
                       extra_env={"KB_DEVELOPMENT_MODE": "false"})
    running.start()
    yield running
    running.stop()


def report(platform: Platform, database_url: str, submission_id: int, mean_ns: float, isolation: str) -> None:
    """As a remote runner would: both runs of the submission, with the level its runner reported."""
    platform.wait_for(lambda: len(archived(database_url, "RunRequested", str(submission_id))) == 2, "run requests")
    result = FullResult(success=True, system=SystemInfo(gpu=GPU), isolation=isolation,
                        runs={s: stage(s, [mean_ns]) for s in ("test", "benchmark", "leaderboard")})
    asyncio.run(publish_all(platform.nats_url, [
        RunCompleted(run_id=run["run_id"], submission_id=submission_id, leaderboard=run["leaderboard"], gpu=run["gpu"],
                     mode=run["mode"], secret=run["secret"], ranking_by="mean", backend="remote", result=result,
                     correlation_id=str(submission_id))
        for run in archived(database_url, "RunRequested", str(submission_id))]))


def test_history_keeps_its_ranks_through_a_replay_and_a_rescore(platform, database_url):
    platform.add_boards(mean_board("levels"))
    outcomes = {}
    for user_id, name, mean_ns, isolation in (("71", "old", 3_000.0, ""), ("72", "full", 2_000.0, "full"),
                                              ("73", "limited", 1_000.0, "limits-only")):
        cli = platform.register(user_id, name)
        submission_id = platform.submit(cli, "levels", GPU, "leaderboard", CODE).json()["details"]["id"]
        report(platform, database_url, submission_id, mean_ns, isolation)
        outcomes[name] = (submission_id, platform.wait_done(cli, submission_id)["job"])

    assert ranked_users(platform, "levels") == ["full", "old"]  # the fastest is not ranked
    assert outcomes["limited"][1]["status"] == "failed"
    assert outcomes["limited"][1]["error"].startswith("not ranked on remote: this runner could not isolate the run")

    wait_projected(platform, database_url)
    live = dump(database_url)
    run_cli(platform, "events", "replay", "all", "--source", "archive")
    assert_same(live, dump(database_url))

    done = run_cli(platform, "rejudge", "--leaderboard", "levels", "--rescore", "--reason", "same mode",
                   process=True)
    assert "0 scores revised" in done.stdout, done.stdout
    assert ranked_users(platform, "levels") == ["full", "old"]

    platform.kill("scorer")
    platform.extra_env["KB_DEVELOPMENT_MODE"] = "true"
    platform.start("scorer")
    done = run_cli(platform, "rejudge", "--leaderboard", "levels", "--rescore", "--reason", "development",
                   process=True)
    assert "1 scores revised" in done.stdout, done.stdout
    assert ranked_users(platform, "levels") == ["limited", "full", "old"]
    [revised] = [r for r in archived(database_url, "ScoreRevised") if r["submission_id"] == outcomes["limited"][0]]
    assert revised["previous_score"] is None and revised["score"] == pytest.approx(1e-6)
