"""SQL of the ledger's projections. Statements take $n parameters; functions take a connection."""

from __future__ import annotations

import asyncpg

from schemas.envelope import Event
from schemas.events import (
    CliUserRegistered,
    LeaderboardCreated,
    LeaderboardDeleted,
    LeaderboardRankChanged,
    LeaderboardUpdated,
    RunCompleted,
    RunDispatched,
    RunFailed,
    RunProgress,
    RunRequested,
    RunStarted,
    ScoreComputed,
    SubmissionAccepted,
    SubmissionFinished,
    SubmissionReceived,
    SubmissionRejected,
)
from services.ledger.projections import stage_rows

ARCHIVE = """
INSERT INTO event_archive (stream_seq, event_id, event_type, subject, correlation_id, occurred_at, payload)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (stream_seq) DO NOTHING
"""
LEADERBOARD_CREATE = """
INSERT INTO leaderboards (name, description, task, task_hash, templates, gpus, deadline, secret_seed, visibility,
                          ranking_by, creator_id, forum_id, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (lower(name)) DO NOTHING
"""
LEADERBOARD_UPDATE = """
UPDATE leaderboards SET description = $2, task = $3, task_hash = $4, templates = $5, deadline = $6, ranking_by = $7
WHERE lower(name) = lower($1)
"""
LEADERBOARD_DELETE = "DELETE FROM leaderboards WHERE lower(name) = lower($1)"
USER_UPSERT = """
INSERT INTO users (user_id, user_name, cli_id, web_auth_id) VALUES ($1, $2, $3, $4)
ON CONFLICT (user_id) DO UPDATE SET user_name = $2, cli_id = $3, web_auth_id = COALESCE($4, users.web_auth_id)
"""
SUBMISSION_INSERT = """
INSERT INTO submissions (id, leaderboard_id, user_id, user_name, file_name, code, mode, gpus, submitted_at)
VALUES ($1, COALESCE((SELECT id FROM leaderboards WHERE lower(name) = lower($2)), 0), $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (id) DO NOTHING
"""
JOB_SET = """
INSERT INTO jobs (submission_id, status, error, updated_at) VALUES ($1, $2, $3, now())
ON CONFLICT (submission_id) DO UPDATE SET status = $2, error = $3, updated_at = now()
WHERE jobs.status NOT IN ('succeeded', 'failed', 'timed_out', 'hacked')
"""
JOB_RUNNING = """
UPDATE jobs SET status = 'running', last_heartbeat = $2, updated_at = now()
WHERE submission_id = $1 AND status IN ('initial', 'pending', 'running')
"""
JOB_HEARTBEAT = "UPDATE jobs SET last_heartbeat = $2 WHERE submission_id = $1 AND status = 'running'"
SUBMISSION_STATUS = "UPDATE submissions SET status = $2, done = $3 WHERE id = $1"
RUN_REQUEST_INSERT = """
INSERT INTO run_requests (run_id, submission_id, gpu, mode, secret, requested_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id) DO NOTHING
"""
RUN_REQUEST_STATUS = """
UPDATE run_requests SET status = $2, backend = COALESCE($3, backend), job_ref = COALESCE($4, job_ref),
       error = COALESCE($5, error),
       started_at = CASE WHEN $2 = 'running' THEN $6 ELSE started_at END,
       finished_at = CASE WHEN $2 IN ('completed', 'failed') THEN $6 ELSE finished_at END
WHERE run_id = $1 AND status NOT IN ('completed', 'failed')
"""
STAGE_INSERT = """
INSERT INTO runs (run_id, stage, submission_id, gpu, secret, passed, result, system, harness_version, start_time,
                  end_time, recorded_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (run_id, stage) DO NOTHING
"""
SCORE_INSERT = """
INSERT INTO scores (submission_id, gpu, leaderboard_id, user_id, score, secret_score, run_id, submitted_at)
VALUES ($1, $2, (SELECT id FROM leaderboards WHERE lower(name) = lower($3)), $4, $5, $6, $7, $8)
ON CONFLICT (submission_id, gpu) DO NOTHING
"""
RUN_SCORE = "UPDATE runs SET score = $2 WHERE run_id = $1 AND stage = 'leaderboard'"
NOTIFY_SUBMISSION = "SELECT pg_notify('kb_submission', $1)"
RANK_CHANGE = """
INSERT INTO rank_changes (stream_seq, leaderboard, gpu, top, occurred_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING
"""


async def archive(conn: asyncpg.Connection, seq: int, event: Event) -> None:
    await conn.execute(
        ARCHIVE, seq, event.event_id, type(event).__name__, event.subject, event.correlation_id,
        event.occurred_at, event.model_dump(mode="json"),
    )


async def project(conn: asyncpg.Connection, seq: int, event: Event) -> None:
    """Apply one event to the read model."""
    match event:
        case LeaderboardCreated():
            await conn.execute(
                LEADERBOARD_CREATE, event.name, event.description, event.task.model_dump(mode="json"),
                event.task_hash, event.templates, event.gpus, event.deadline, event.secret_seed, event.visibility,
                event.task.ranking_by, event.creator_id, event.forum_id, event.occurred_at,
            )
        case LeaderboardUpdated():
            await conn.execute(
                LEADERBOARD_UPDATE, event.name, event.description, event.task.model_dump(mode="json"),
                event.task_hash, event.templates, event.deadline, event.task.ranking_by,
            )
        case LeaderboardDeleted():
            await conn.execute(LEADERBOARD_DELETE, event.name)
        case CliUserRegistered():
            await conn.execute(USER_UPSERT, event.user_id, event.user_name, event.cli_id, event.web_auth_id)
        case SubmissionReceived():
            await conn.execute(
                SUBMISSION_INSERT, event.submission_id, event.leaderboard, event.user_id, event.user_name,
                event.file_name, event.code, event.mode, event.gpus, event.occurred_at,
            )
            await conn.execute(JOB_SET, event.submission_id, "initial", None)
            # wakes a gateway waiting to answer 202 only once the submission is readable (http-api.md §3.9)
            await conn.execute(NOTIFY_SUBMISSION, str(event.submission_id))
        case SubmissionAccepted():
            await conn.execute(JOB_SET, event.submission_id, "pending", None)
            await conn.execute(SUBMISSION_STATUS, event.submission_id, "accepted", False)
        case SubmissionRejected():
            await _finish(conn, event.submission_id, "failed", event.reason, "rejected")
        case SubmissionFinished():
            await _finish(conn, event.submission_id, event.status, event.error, event.status)
        case RunRequested():
            await conn.execute(
                RUN_REQUEST_INSERT, event.run_id, event.submission_id, event.gpu, event.mode, event.secret,
                event.occurred_at,
            )
        case RunDispatched():
            await _run_status(conn, event.run_id, "dispatched", event.occurred_at, event.backend, event.job_ref)
        case RunStarted():
            await _run_status(conn, event.run_id, "running", event.occurred_at)
            await conn.execute(JOB_RUNNING, event.submission_id, event.occurred_at)
        case RunProgress():
            await conn.execute(JOB_HEARTBEAT, event.submission_id, event.occurred_at)
        case RunCompleted():
            rows = stage_rows(event)
            await conn.executemany(
                STAGE_INSERT,
                [
                    (r.run_id, r.stage, r.submission_id, r.gpu, r.secret, r.passed, r.result, r.system,
                     r.harness_version, r.start_time, r.end_time, seq)
                    for r in rows
                ],
            )
            await _run_status(conn, event.run_id, "completed", event.occurred_at)
        case RunFailed():
            await _run_status(conn, event.run_id, "failed", event.occurred_at, error=f"{event.reason}: {event.detail}")
        case ScoreComputed():
            await conn.execute(
                SCORE_INSERT, event.submission_id, event.gpu, event.leaderboard, event.user_id, event.score,
                event.secret_score, event.run_id, event.submitted_at,
            )
            await conn.execute(RUN_SCORE, event.run_id, event.score)
        case LeaderboardRankChanged():
            await conn.execute(
                RANK_CHANGE, seq, event.leaderboard, event.gpu, [e.model_dump(mode="json") for e in event.top],
                event.occurred_at,
            )


async def _finish(conn: asyncpg.Connection, submission_id: int, status: str, error: str | None, label: str) -> None:
    # done and the terminal status change in one transaction, so a poller never sees one without the other
    await conn.execute(JOB_SET, submission_id, status, error)
    await conn.execute(SUBMISSION_STATUS, submission_id, label, True)


async def _run_status(conn, run_id, status, at, backend=None, job_ref=None, error=None) -> None:
    await conn.execute(RUN_REQUEST_STATUS, run_id, status, backend, job_ref, error, at)

