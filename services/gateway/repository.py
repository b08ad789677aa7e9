"""SQL the gateway reads. The gateway writes nothing: every change travels as an event."""

from __future__ import annotations

import asyncpg

USER_BY_CLI = "SELECT user_id, user_name, banned FROM users WHERE cli_id = $1"
USER_BY_WEB = "SELECT user_id, user_name, banned FROM users WHERE web_auth_id = $1"
USER_BY_ID = "SELECT user_id, user_name, cli_id FROM users WHERE user_id = $1"
CLI_OWNER = "SELECT user_id FROM users WHERE cli_id = $1"
LEADERBOARD = "SELECT * FROM leaderboards WHERE lower(name) = lower($1)"
LEADERBOARDS = "SELECT * FROM leaderboards ORDER BY id"
NEXT_SUBMISSION_ID = "SELECT nextval('submission_ids')"
SUBMISSION = """
SELECT s.*, l.name AS leaderboard_name, j.status AS job_status, j.error AS job_error,
       j.last_heartbeat AS job_last_heartbeat
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id LEFT JOIN jobs j ON j.submission_id = s.id
WHERE s.id = $1
"""
SUBMISSION_RUNS = "SELECT * FROM runs WHERE submission_id = $1 ORDER BY recorded_seq, start_time, stage"
RANKING = """
WITH best AS (
    SELECT DISTINCT ON (sc.user_id) sc.submission_id, sc.user_id, sc.score, sc.submitted_at, s.file_name, s.user_name
    FROM scores sc JOIN submissions s ON s.id = sc.submission_id
    WHERE sc.leaderboard_id = $1 AND sc.gpu = $2 AND s.status <> 'hacked'
    ORDER BY sc.user_id, sc.score, sc.submitted_at, sc.submission_id
)
SELECT *, RANK() OVER (ORDER BY score) AS rank FROM best
ORDER BY score, submitted_at, submission_id LIMIT $3 OFFSET $4
"""
QUEUE = """
SELECT count(*) FILTER (WHERE status = 'queued') AS queued,
       count(*) FILTER (WHERE status IN ('dispatched', 'running')) AS running,
       (SELECT backend FROM run_requests WHERE lower(gpu) = lower($1) AND backend IS NOT NULL
        ORDER BY requested_at DESC LIMIT 1) AS backend
FROM run_requests WHERE lower(gpu) = lower($1) AND status IN ('queued', 'dispatched', 'running')
"""
KNOWN_GPU = "SELECT g FROM leaderboards, unnest(gpus) AS g WHERE lower(g) = lower($1) LIMIT 1"


async def user_by_cli(pool: asyncpg.Pool, cli_id: str):
    return await pool.fetchrow(USER_BY_CLI, cli_id)


async def user_by_web(pool: asyncpg.Pool, web_id: str):
    return await pool.fetchrow(USER_BY_WEB, web_id)


async def user_by_id(pool: asyncpg.Pool, user_id: str):
    return await pool.fetchrow(USER_BY_ID, user_id)


async def cli_owner(pool: asyncpg.Pool, cli_id: str) -> str | None:
    return await pool.fetchval(CLI_OWNER, cli_id)


async def leaderboard(pool: asyncpg.Pool, name: str):
    return await pool.fetchrow(LEADERBOARD, name)


async def leaderboards(pool: asyncpg.Pool):
    return await pool.fetch(LEADERBOARDS)


async def next_submission_id(pool: asyncpg.Pool) -> int:
    return await pool.fetchval(NEXT_SUBMISSION_ID)


async def submission(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetchrow(SUBMISSION, submission_id)


async def submission_runs(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetch(SUBMISSION_RUNS, submission_id)


async def ranking(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int | None, offset: int):
    return await pool.fetch(RANKING, leaderboard_id, gpu, limit, offset)


async def queue(pool: asyncpg.Pool, gpu: str):
    known = await pool.fetchval(KNOWN_GPU, gpu)
    if known is None:
        return None
    row = await pool.fetchrow(QUEUE, gpu)
    return known, row
