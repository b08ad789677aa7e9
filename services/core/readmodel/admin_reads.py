"""SQL the admin use cases read, for the gateway's admin routes (docs/http-api.md "Admin routes") and the bot's `/admin`
commands: intake, users, boards, invites, rate limits, submissions and statistics. It writes nothing."""

from __future__ import annotations

from datetime import datetime

import asyncpg

INTAKE = "SELECT NOT EXISTS (SELECT 1 FROM intake WHERE NOT accepting)"
USER = "SELECT user_id, user_name, banned FROM users WHERE user_id = $1"
USERS_NAMED = "SELECT user_id, user_name, banned FROM users WHERE lower(user_name) = lower($1) ORDER BY user_id LIMIT 5"
LEADERBOARD_BY_ID = "SELECT * FROM leaderboards WHERE id = $1"
RATE_LIMITS = """
SELECT r.id, r.leaderboard_id, l.name AS leaderboard_name, r.mode_category, r.max_submissions_per_hour
FROM rate_limits r JOIN leaderboards l ON l.id = r.leaderboard_id
WHERE r.leaderboard_id = $1 AND r.max_submissions_per_hour IS NOT NULL ORDER BY r.mode_category
"""
INVITE = "SELECT * FROM invites WHERE code = $1"
BOARD_INVITES = "SELECT * FROM invites WHERE $1::integer = ANY(leaderboard_ids) ORDER BY created_at, code"
BOARD_NAMES = "SELECT name FROM leaderboards WHERE id = ANY($1::integer[]) ORDER BY name"
BOARD_SUBMISSIONS = """
SELECT id FROM submissions WHERE leaderboard_id = $1 AND NOT deleted
ORDER BY submitted_at DESC, id DESC LIMIT $2 OFFSET $3
"""
# Admin view of one submission (docs/http-api.md "Admin routes"): deleted ones are gone for admins too.
SUBMISSION = """
SELECT s.*, l.name AS leaderboard_name, j.status AS job_status, j.error AS job_error,
       j.last_heartbeat AS job_last_heartbeat
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id LEFT JOIN jobs j ON j.submission_id = s.id
WHERE s.id = $1 AND NOT s.deleted
"""
USER_BOARD_SUBMISSIONS = """
SELECT s.id, s.user_id,
       (SELECT count(*) FROM runs r WHERE r.submission_id = s.id) AS runs,
       EXISTS (SELECT 1 FROM jobs j WHERE j.submission_id = s.id) AS has_job
FROM submissions s WHERE s.leaderboard_id = $1 AND s.user_name = $2 AND NOT s.deleted ORDER BY s.id
"""
# Statistics (docs/http-api.md "Admin routes") over the runs of submissions not deleted, optionally of the last day /
# one board.
STATS_SCOPE = """
WITH scope AS (
    SELECT s.* FROM submissions s
    WHERE NOT s.deleted AND ($1::timestamptz IS NULL OR s.submitted_at > $1)
      AND ($2::integer IS NULL OR s.leaderboard_id = $2)
), scoped_runs AS (
    SELECT r.*, s.submitted_at, s.user_id FROM run_requests r JOIN scope s ON s.id = r.submission_id
)
"""
STATS_TOTALS = STATS_SCOPE + """
SELECT (SELECT count(*) FROM scope) AS num_submissions,
       (SELECT count(*) FROM scope WHERE NOT done) AS sub_waiting,
       (SELECT count(DISTINCT user_id) FROM scope) AS num_users,
       (SELECT count(DISTINCT md5(code)) FROM scope) AS num_unique_codes
"""
STATS_BY_GPU = STATS_SCOPE + """
SELECT gpu, count(*) AS num_run,
       count(*) FILTER (WHERE status = 'completed' AND success
                        AND NOT EXISTS (SELECT 1 FROM runs x WHERE x.run_id = scoped_runs.run_id AND NOT x.passed))
           AS runs_passed,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM runs x WHERE x.run_id = scoped_runs.run_id
                                      AND x.score IS NOT NULL)) AS runs_scored,
       count(*) FILTER (WHERE secret) AS runs_secret,
       COALESCE(max(extract(epoch FROM started_at - submitted_at)), 0) AS max_delay,
       COALESCE(avg(extract(epoch FROM started_at - submitted_at)), 0) AS avg_delay,
       COALESCE(sum(extract(epoch FROM finished_at - started_at)), 0) AS total_runtime
FROM scoped_runs GROUP BY gpu ORDER BY gpu
"""
STATS_BY_USER = STATS_SCOPE + """
SELECT user_id, sum(extract(epoch FROM finished_at - started_at)) AS total FROM scoped_runs
WHERE finished_at IS NOT NULL AND started_at IS NOT NULL GROUP BY user_id ORDER BY total DESC, user_id LIMIT 10
"""


async def accepting(pool: asyncpg.Pool) -> bool:
    return await pool.fetchval(INTAKE)


async def user(pool: asyncpg.Pool, user_id: str):
    return await pool.fetchrow(USER, user_id)


async def users_named(pool: asyncpg.Pool, name: str):
    return await pool.fetch(USERS_NAMED, name)


async def leaderboard_by_id(pool: asyncpg.Pool, leaderboard_id: int):
    if abs(leaderboard_id) > 2**31 - 1:
        return None
    return await pool.fetchrow(LEADERBOARD_BY_ID, leaderboard_id)


async def rate_limits(pool: asyncpg.Pool, leaderboard_id: int):
    return await pool.fetch(RATE_LIMITS, leaderboard_id)


async def invite(pool: asyncpg.Pool, code: str):
    return await pool.fetchrow(INVITE, code)


async def board_invites(pool: asyncpg.Pool, leaderboard_id: int):
    return await pool.fetch(BOARD_INVITES, leaderboard_id)


async def board_names(pool: asyncpg.Pool, leaderboard_ids: list[int]) -> list[str]:
    return [row["name"] for row in await pool.fetch(BOARD_NAMES, leaderboard_ids)]


async def board_submissions(pool: asyncpg.Pool, leaderboard_id: int, limit: int, offset: int) -> list[int]:
    return [row["id"] for row in await pool.fetch(BOARD_SUBMISSIONS, leaderboard_id, limit, min(offset, 2**63 - 1))]


async def submission(pool: asyncpg.Pool, submission_id: int):
    if abs(submission_id) > 2**63 - 1:
        return None
    return await pool.fetchrow(SUBMISSION, submission_id)


async def user_board_submissions(pool: asyncpg.Pool, leaderboard_id: int, user_name: str):
    return await pool.fetch(USER_BOARD_SUBMISSIONS, leaderboard_id, user_name)


async def stats(pool: asyncpg.Pool, since: datetime | None, leaderboard_id: int | None):
    async with pool.acquire() as conn, conn.transaction(readonly=True, isolation="repeatable_read"):
        totals = await conn.fetchrow(STATS_TOTALS, since, leaderboard_id)
        by_gpu = await conn.fetch(STATS_BY_GPU, since, leaderboard_id)
        by_user = await conn.fetch(STATS_BY_USER, since, leaderboard_id) if since is not None else []
    return totals, by_gpu, by_user
