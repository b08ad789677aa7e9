"""The scorer's consumers: collect run verdicts, and judge a submission once all its runs have ended."""

from __future__ import annotations

from faststream.nats import NatsRouter

from schemas.envelope import Event
from schemas.events import (
    LeaderboardRankChanged,
    RankEntry,
    RunCompleted,
    RunFailed,
    ScoreComputed,
    ScoreRejected,
    SubmissionAccepted,
    SubmissionFinished,
)
from services.kit.bus import document_publishers
from services.kit.consumer import KitSlot
from services.kit.runtime import durable_consumer
from services.scorer import repository, scoring
from services.scorer.scoring import BoardEntry

router = NatsRouter()
kit = KitSlot()
document_publishers(router, "scorer", (ScoreComputed, ScoreRejected, LeaderboardRankChanged, SubmissionFinished))


async def judge_if_complete(conn, submission_id: int) -> list[Event]:
    found = await repository.submission(conn, submission_id)
    if found is None:
        return []  # the acceptance has not arrived yet; it judges when it does
    row, planned = found
    if row["finished"]:
        return []
    verdicts = await repository.verdicts(conn, submission_id)
    if any(run.run_id not in verdicts for run in planned):
        return []
    decision = scoring.decide(row["mode"], planned, verdicts)
    await repository.mark_finished(conn, submission_id)
    tags = {"correlation_id": str(submission_id)}
    events: list[Event] = []
    for score in decision.scores:
        events.append(ScoreComputed(
            submission_id=submission_id, leaderboard=row["leaderboard"], gpu=score.gpu, user_id=row["user_id"],
            user_name=row["user_name"], run_id=score.run_id, score=score.score, secret_score=score.secret_score,
            ranking_by=row["ranking_by"], harness_version=score.harness_version, submitted_at=row["submitted_at"],
            **tags,
        ))
        events.extend(await _rank_change(conn, row, score))
    for rejection in decision.rejections:
        events.append(ScoreRejected(submission_id=submission_id, leaderboard=row["leaderboard"], gpu=rejection.gpu,
                                    reason=rejection.reason, **tags))
    events.append(SubmissionFinished(submission_id=submission_id, status=decision.status, error=decision.error,
                                     **tags))
    return events


async def _rank_change(conn, row, score: scoring.GpuScore) -> list[Event]:
    board, gpu = row["leaderboard"], score.gpu
    before = await repository.top(conn, board, gpu)
    entry = BoardEntry(row["user_id"], row["user_name"], score.score, row["submission_id"])
    await repository.offer_best(conn, board, gpu, entry, row["submitted_at"])
    after = await repository.top(conn, board, gpu)
    if after == before:
        return []

    def entries(top):
        return [RankEntry(rank=rank, user_id=e.user_id, user_name=e.user_name, score=e.score,
                          submission_id=e.submission_id) for rank, e in scoring.competition_ranks(top)]

    return [LeaderboardRankChanged(leaderboard=board, gpu=gpu, top=entries(after), previous_top=entries(before),
                                   caused_by_submission=row["submission_id"],
                                   correlation_id=str(row["submission_id"]))]


@router.subscriber("evt.submission.accepted", **durable_consumer("scorer-accepted"), title="scorer-accepted")
async def on_accepted(event: SubmissionAccepted) -> None:
    async def apply(conn):
        await repository.lock_submission(conn, event.submission_id)
        await repository.add_submission(conn, event)
        return await judge_if_complete(conn, event.submission_id)

    await kit().handle(apply)


@router.subscriber("evt.run.completed", **durable_consumer("scorer-run-completed"), title="scorer-run-completed")
async def on_run_completed(event: RunCompleted) -> None:
    async def apply(conn):
        await repository.lock_submission(conn, event.submission_id)
        verdict = scoring.verdict_of(event.result, event.mode, event.ranking_by)
        if not await repository.add_verdict(conn, event.run_id, event.submission_id, event.gpu, event.mode,
                                            event.secret, verdict):
            return []  # this run was already judged: a duplicate report counts once
        return await judge_if_complete(conn, event.submission_id)

    await kit().handle(apply)


@router.subscriber("evt.run.failed", **durable_consumer("scorer-run-failed"), title="scorer-run-failed")
async def on_run_failed(event: RunFailed) -> None:
    async def apply(conn):
        await repository.lock_submission(conn, event.submission_id)
        verdict = scoring.failed_run_verdict(event.reason, event.detail)
        if not await repository.add_verdict(conn, event.run_id, event.submission_id, event.gpu, "", False, verdict):
            return []
        return await judge_if_complete(conn, event.submission_id)

    await kit().handle(apply)
