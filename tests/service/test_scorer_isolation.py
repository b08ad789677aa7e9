"""The scorer's handlers through TestNatsBroker: a result its runner could not fully isolate is judged, not ranked,
and the user is told why; development mode (the running scorer's setting, else the environment's) ranks it."""

from __future__ import annotations

import pytest

from schemas.events import LeaderboardRankChanged, ScoreComputed, ScoreRejected, SubmissionFinished
from services.scorer.handlers import ScorerConfig, kit, router
from tests.service.test_scorer import RANKED, accepted, completed
from tests.support.service_tier import running_service

LIMITS_ONLY = RANKED.model_copy(update={"isolation": "limits-only"})


async def _judge(database_url: str, isolation_of_secret: str = "limits-only"):
    secret = RANKED.model_copy(update={"isolation": isolation_of_secret})
    async with running_service(router, kit, database_url) as bus:
        await bus.publish(accepted(1), completed(1, secret=False, result=LIMITS_ONLY),
                          completed(1, secret=True, result=secret))
        await bus.settle()
        return bus.emitted(ScoreComputed), bus.emitted(ScoreRejected), bus.emitted(LeaderboardRankChanged), \
            bus.emitted(SubmissionFinished)


@pytest.mark.parametrize("secret", ["limits-only", "full"])
async def test_a_limits_only_run_is_not_ranked_and_the_user_is_told_why(service_database, monkeypatch, secret):
    monkeypatch.setattr(kit, "config", ScorerConfig(same_hardware=False, development_mode=False))
    scores, [rejected], changes, [finished] = await _judge(service_database, secret)

    assert scores == [] and changes == []
    assert rejected.reason.startswith("not ranked on cpu: this runner could not isolate the run (limits-only: ")
    assert finished.status == "failed"
    assert finished.error == f"{rejected.reason}; submission will not appear on the leaderboard"


async def test_development_mode_ranks_it(service_database, monkeypatch):
    monkeypatch.setattr(kit, "config", ScorerConfig(same_hardware=False, development_mode=True))
    [score], rejected, [change], [finished] = await _judge(service_database)

    assert rejected == [] and score.score > 0
    assert [entry.submission_id for entry in change.top] == [1]
    assert (finished.status, finished.error) == ("succeeded", None)


@pytest.mark.parametrize(("setting", "ranked"), [("true", True), ("false", False)])
async def test_without_a_running_scorer_a_replay_reads_the_mode_from_the_environment(service_database, monkeypatch,
                                                                                      setting, ranked):
    monkeypatch.setattr(kit, "config", None)
    monkeypatch.setenv("KB_DEVELOPMENT_MODE", setting)
    scores, _, _, _ = await _judge(service_database)
    assert len(scores) == (1 if ranked else 0)
