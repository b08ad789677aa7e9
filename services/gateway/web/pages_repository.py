"""SQL the web pages read beyond the API's own queries (services/core/readmodel/)."""

from __future__ import annotations

import asyncpg

from services.core.readmodel.standing_reads import Known, ranking_with_results

# The standing entries in time order, for the plot of the best score over time: each user's best, the step line
# the records among them. Bounded by the number of users, not of attempts.
ATTEMPTS = """
SELECT score, submitted_at, user_name FROM standings WHERE leaderboard_id = $1 AND gpu = $2
ORDER BY submitted_at, submission_id LIMIT $3
"""
SESSION_USER = "SELECT user_id, user_name, cli_id_sha256 FROM users WHERE user_id = $1"
MY_SUBMISSIONS = """
SELECT s.id, s.file_name, s.submitted_at, s.mode, s.gpus, s.done, l.name AS leaderboard_name, j.status AS job_status
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id LEFT JOIN jobs j ON j.submission_id = s.id
WHERE s.user_id = $1 AND NOT s.deleted
ORDER BY s.submitted_at DESC, s.id DESC LIMIT $2
"""


async def ranking(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int, known: Known):
    """The API's ranking (docs/http-api.md "Public reads") with each entry's leaderboard stage result map, for its
    interval, but those `known` says are kept."""
    return (await ranking_with_results(pool, leaderboard_id, gpu, limit, known=known))[1]


async def attempts(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int):
    return await pool.fetch(ATTEMPTS, leaderboard_id, gpu, limit)


async def session_user(pool: asyncpg.Pool, user_id: str):
    return await pool.fetchrow(SESSION_USER, user_id)


async def my_submissions(pool: asyncpg.Pool, user_id: str, limit: int):
    return await pool.fetch(MY_SUBMISSIONS, user_id, limit)
