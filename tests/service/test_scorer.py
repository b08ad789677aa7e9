"""The scorer's handlers through TestNatsBroker: judging, order tolerance, duplicates and the pre-check hold."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from schemas.contracts import FullResult
from schemas.events import (
    LeaderboardRankChanged,
    PlannedRun,
    RunCompleted,
    ScoreComputed,
    ScoreRejected,
    SubmissionAccepted,
    SubmissionFinished,
)
from schemas.streams import EVENTS
from services.kit.bus import MSG_ID_HEADER
from services.scorer.handlers import kit, router
from tests.support.service_tier import MemoryStream, running_service

RESULTS = json.loads((Path(__file__).parents[1] / "fixtures" / "run_results.json").read_text())
RANKED = FullResult.model_validate(RESULTS["leaderboard"])
CRASHED = FullResult.model_validate(RESULTS["crash"])


def accepted(submission_id: int, user: str = "u1", **extra) -> SubmissionAccepted:
    return SubmissionAccepted(
        submission_id=submission_id, leaderboard="vectoradd_py", user_id=user, user_name=f"name-{user}",
        mode="leaderboard", ranking_by="last", submitted_at=datetime(2026, 11, 1, tzinfo=UTC),
        runs=[PlannedRun(run_id=f"{submission_id}-pub", gpu="cpu", mode="leaderboard"),
              PlannedRun(run_id=f"{submission_id}-sec", gpu="cpu", mode="private", secret=True)],
        correlation_id=str(submission_id), **extra)


def completed(submission_id: int, secret: bool, result: FullResult = RANKED) -> RunCompleted:
    return RunCompleted(run_id=f"{submission_id}-{'sec' if secret else 'pub'}", submission_id=submission_id,
                        leaderboard="vectoradd_py", gpu="cpu", mode="private" if secret else "leaderboard",
                        secret=secret, result=result, correlation_id=str(submission_id))


async def test_a_ranked_submission_is_scored_once_both_runs_end(service_database):
    async with running_service(router, kit, service_database) as bus:
        await bus.publish(accepted(1), completed(1, secret=False))
        await bus.settle()
        assert bus.emitted(SubmissionFinished) == []  # the secret run has not ended
        await bus.publish(completed(1, secret=True))
        await bus.settle()

        [score] = bus.emitted(ScoreComputed)
        assert (score.submission_id, score.user_id, score.gpu) == (1, "u1", "cpu")
        assert score.score > 0
        [change] = bus.emitted(LeaderboardRankChanged)
        assert [e.submission_id for e in change.top] == [1] and change.previous_top == []
        [finished] = bus.emitted(SubmissionFinished)
        assert finished.status == "succeeded"


async def test_runs_reported_before_the_acceptance_are_judged_when_it_arrives(service_database):
    async with running_service(router, kit, service_database) as bus:
        await bus.publish(completed(2, secret=True), completed(2, secret=False))
        await bus.settle()
        assert bus.emitted(SubmissionFinished) == []
        await bus.publish(accepted(2))
        await bus.settle()
        assert [f.status for f in bus.emitted(SubmissionFinished)] == ["succeeded"]
        assert len(bus.emitted(ScoreComputed)) == 1


async def test_a_report_delivered_again_changes_nothing(service_database):
    async with running_service(router, kit, service_database) as bus:
        public = completed(3, secret=False)
        await bus.publish(accepted(3), public, completed(3, secret=True))
        await bus.settle()
        emitted = len(bus.stream.messages)

        await bus.redeliver(public, sequence=2)  # the same stream position: the kit's tracking row drops it
        await bus.publish(public)  # the same message id again: the duplicate window drops it
        copy = public.model_copy(update={"event_id": public.event_id + ":again"})
        await bus.publish(copy)  # a copy under a new id: the scorer's verdict table drops it
        await bus.settle()

        assert len(bus.stream.messages) == emitted + 1  # only the copy was stored, and it caused nothing
        assert len(bus.emitted(ScoreComputed)) == len(bus.emitted(SubmissionFinished)) == 1


async def test_the_same_facts_published_again_after_the_duplicate_window_are_not_judged_again(service_database):
    async with running_service(router, kit, service_database) as bus:
        facts = (accepted(6), completed(6, secret=False), completed(6, secret=True))
        await bus.publish(*facts)
        await bus.settle()
        stored = len(bus.stream.messages)

        bus.stream.pass_time(EVENTS.duplicate_window_s + 1)  # an outbox relaying its backlog after a long outage
        await bus.publish(*facts)
        await bus.settle()

        assert len(bus.stream.messages) == stored + len(facts)  # stored again: the window no longer drops them
        assert len(bus.emitted(ScoreComputed)) == len(bus.emitted(SubmissionFinished)) == 1


def test_the_memory_stream_forgets_a_message_id_after_the_duplicate_window():
    stream = MemoryStream()

    async def twice(after_s: float) -> bool:
        await stream.publish("evt.x", b"{}", {MSG_ID_HEADER: f"id-{after_s}"})
        stream.pass_time(after_s)
        return bool((await stream.publish("evt.x", b"{}", {MSG_ID_HEADER: f"id-{after_s}"})).duplicate)

    assert asyncio.run(twice(EVENTS.duplicate_window_s - 1)) is True
    assert asyncio.run(twice(EVENTS.duplicate_window_s)) is False


async def test_a_crashed_public_run_fails_the_submission_without_a_score(service_database):
    async with running_service(router, kit, service_database) as bus:
        await bus.publish(accepted(4), completed(4, secret=False, result=CRASHED), completed(4, secret=True))
        await bus.settle()
        assert bus.emitted(ScoreComputed) == [] and bus.emitted(LeaderboardRankChanged) == []
        [rejected] = bus.emitted(ScoreRejected)
        assert rejected.gpu == "cpu" and rejected.reason
        [finished] = bus.emitted(SubmissionFinished)
        assert finished.status == "failed" and finished.error


async def test_a_submission_the_precheck_held_as_hacked_never_ranks(service_database):
    held = {"precheck": {"outcome": "hacked", "detail": "patches the timer", "findings": [
        {"rule": "timer-patch", "severity": "hacked", "message": "patches the timer", "line": 3}]}}
    async with running_service(router, kit, service_database) as bus:
        await bus.publish(accepted(5, **held), completed(5, secret=False), completed(5, secret=True))
        await bus.settle()
        assert bus.emitted(ScoreComputed) == [] and bus.emitted(LeaderboardRankChanged) == []
        [finished] = bus.emitted(SubmissionFinished)
        assert finished.status == "hacked"


async def test_a_faster_submission_takes_the_top_and_names_who_it_displaced(service_database):
    async with running_service(router, kit, service_database) as bus:
        await bus.publish(accepted(6, user="slow"), completed(6, False), completed(6, True))
        await bus.settle()
        faster = RANKED.model_copy(deep=True)
        for stage in faster.runs.values():
            if stage.run and "benchmark.0.mean" in stage.run.result:
                stage.run.result["benchmark.0.mean"] = str(float(stage.run.result["benchmark.0.mean"]) / 2)
        await bus.publish(accepted(7, user="fast"), completed(7, False, faster), completed(7, True, faster))
        await bus.settle()

        last = bus.emitted(LeaderboardRankChanged)[-1]
        assert [e.user_id for e in last.top] == ["fast", "slow"]
        assert [e.user_id for e in last.previous_top] == ["slow"]


async def test_a_score_the_scorer_published_comes_back_without_a_transaction(service_database):
    """Its own score read back from the log is in its best table already (own_scores.py): acknowledged, not applied
    again. One it did not publish (an imported history's) still goes through the transaction."""
    async with running_service(router, kit, service_database) as bus:
        await bus.publish(accepted(1), completed(1, secret=False), completed(1, secret=True))
        await bus.settle()
        [own] = [m for m in bus.stream.messages if m.subject == ScoreComputed.subject]
        imported = ScoreComputed(submission_id=2, leaderboard="vectoradd_py", gpu="cpu", user_id="u2",
                                 user_name="name-u2", run_id="2-pub", score=1e-6, ranking_by="last",
                                 harness_version="upstream", submitted_at=datetime(2026, 11, 1, tzinfo=UTC),
                                 correlation_id="2")
        await bus.publish(imported)
        await bus.settle()
        [other] = [m for m in bus.stream.messages if m.subject == ScoreComputed.subject and m.sequence != own.sequence]
        conn = await asyncpg.connect(service_database)
        try:
            tracked = {r["stream_seq"] for r in await conn.fetch("SELECT stream_seq FROM tracking")}
            kept = await conn.fetchval("SELECT count(*) FROM scorer_scores WHERE submission_id = 2")
        finally:
            await conn.close()
        assert own.sequence not in tracked and other.sequence in tracked
        assert kept == 1
