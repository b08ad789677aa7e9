"""Events into the bot's state and its outbox of Discord calls, in the transaction of the consumer's tracking row.

Nothing here talks to Discord: a call decided here is delivered after commit by services.discord.delivery, so a
redelivered event changes nothing and a restarted bot delivers what was decided before it stopped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas.envelope import Event
from schemas.events import (
    LeaderboardCreated,
    LeaderboardDeleted,
    LeaderboardRankChanged,
    LeaderboardUpdated,
    RunCompleted,
    RunFailed,
    RunProgress,
    RunStarted,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionFinished,
    SubmissionRejected,
)
from services.discord import podium, repository, texts
from services.discord.reporting import run_result, status_report

SUBJECTS = tuple(e.subject for e in (SubmissionAccepted, RunStarted, RunProgress, RunCompleted, RunFailed,
                                     SubmissionFinished, SubmissionRejected, ScoreComputed, LeaderboardRankChanged,
                                     LeaderboardCreated, LeaderboardUpdated, LeaderboardDeleted))
ANNOUNCE_WITHIN = timedelta(minutes=15)
# forum_id of a scratch board (/admin verify-task makes one and deletes it): neither posted nor announced
SCRATCH_FORUM_ID = 0


async def _status(conn, submission_id: int) -> None:
    await repository.enqueue(conn, "status", submission_id, {})


def _news(event: Event) -> bool:
    """Announcements are for what just happened: a first start replaying the log does not repeat history."""
    return datetime.now(UTC) - event.occurred_at < ANNOUNCE_WITHIN


async def apply(conn, event: Event) -> None:
    if event.subject not in SUBJECTS:
        return
    if isinstance(event, LeaderboardRankChanged | LeaderboardCreated) and not _news(event):
        return
    match event:
        case LeaderboardRankChanged():
            top = [e.model_dump(mode="json") for e in event.top]
            previous = [e.model_dump(mode="json") for e in event.previous_top]
            if podium.announced_board(event.leaderboard) and podium.change(top, previous) is not None:
                await repository.enqueue(conn, "podium", None, {"leaderboard": event.leaderboard, "gpu": event.gpu,
                                                                "top": top, "previous": previous})
            return
        case LeaderboardCreated():
            if event.visibility == "public" and event.forum_id != SCRATCH_FORUM_ID:
                await repository.enqueue(conn, "forum_post", None, {
                    "name": event.name, "description": event.description, "gpus": event.gpus,
                    "deadline": event.deadline.isoformat()})
            return
        # Not news only: a board changed or deleted while the bot was down still gets its post kept in step. Boards
        # whose post the bot never made (closed ones, or ones from before it kept ids) have nothing to change.
        case LeaderboardUpdated():
            await repository.enqueue(conn, "forum_update", None, {
                "name": event.name, "description": event.description, "deadline": event.deadline.isoformat()})
            return
        case LeaderboardDeleted():
            await repository.enqueue(conn, "forum_archive", None, {"name": event.name})
            return
    submission_id = getattr(event, "submission_id", None)
    row = await repository.tracked(conn, submission_id, lock=True) if submission_id is not None else None
    if row is None:
        return  # not a Discord submission
    match event:
        case SubmissionAccepted():
            # Every planned run gets its line now: the reply knows which runs the outcome waits for, whatever
            # order their ends arrive in (services.discord.delivery holds a final line until they are in).
            for planned in event.runs:
                if planned.run_id not in row["run_lines"]:
                    await repository.set_run_line(conn, submission_id, planned.run_id,
                                                  texts.queued_line(planned.gpu, planned.secret))
            await _status(conn, submission_id)
        case RunStarted():
            await repository.add_run(conn, event.run_id, submission_id, event.gpu)
            line = texts.started_from(row["run_lines"].get(event.run_id), event.gpu)
            if line is not None:
                await repository.set_run_line(conn, submission_id, event.run_id, line)
                await _status(conn, submission_id)
        case RunProgress():
            if str(row["run_lines"].get(event.run_id, "")).startswith("⏳"):
                gpu = (await repository.run(conn, event.run_id) or {"gpu": "?"})["gpu"]
                await repository.set_run_line(conn, submission_id, event.run_id,
                                              texts.progress_line(gpu, event.message))
                await _status(conn, submission_id)
        case RunCompleted():
            await repository.add_run(conn, event.run_id, submission_id, event.gpu)
            result = run_result(event)
            await repository.set_run_line(conn, submission_id, event.run_id,
                                          status_report(event.gpu, event.backend, event.mode, event.secret, result))
            await _status(conn, submission_id)
            if not event.secret:  # a secret run's output never leaves the server
                await repository.enqueue(conn, "thread_report", submission_id, {
                    "run_id": event.run_id, "gpu": event.gpu, "backend": event.backend, "mode": event.mode,
                    "result": result})
        case RunFailed():
            await repository.set_run_line(conn, submission_id, event.run_id,
                                          texts.failed_run_lines(event.gpu, event.reason, event.detail))
            await _status(conn, submission_id)
        case ScoreComputed():
            await repository.enqueue(conn, "verdict", submission_id, {
                "leaderboard": event.leaderboard, "gpu": event.gpu, "score": event.score, "user_id": event.user_id})
        case SubmissionRejected():
            await repository.finish(conn, submission_id, f"❌ Submission {submission_id} refused: {event.reason}")
            await _status(conn, submission_id)
        case SubmissionFinished():
            await repository.finish(conn, submission_id, texts.final_line(submission_id, event.status, event.error))
            await _status(conn, submission_id)


async def apply_batch(conn, batch: list[tuple[int, Event]]) -> None:
    for _seq, event in batch:
        await apply(conn, event)
