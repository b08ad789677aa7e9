"""Submissions as the read model holds them: ids (fresh, or taken by an idempotency key), one submission with its
job, its runs and planned runs, a user's list, and the dispatcher's decision on it. Every read leaves deleted
submissions out (docs/http-api.md "A user's submissions"); only the stream reads the flag itself."""

from __future__ import annotations

import asyncpg

# Postgres bigint; larger ids name nothing and larger offsets skip everything.
MAX_BIGINT = 2**63 - 1

WAS_DELETED = "SELECT deleted FROM submissions WHERE id = $1"
NEXT_SUBMISSION_ID = "SELECT nextval('submission_ids')"
# One statement: the first request with a key takes a fresh id, every retry finds it (two at once: one inserts).
SUBMISSION_FOR_KEY = """
WITH taken AS (
    INSERT INTO submission_keys (user_id, key, submission_id) VALUES ($1, $2, nextval('submission_ids'))
    ON CONFLICT (user_id, key) DO NOTHING RETURNING submission_id
)
SELECT submission_id FROM taken
UNION ALL SELECT submission_id FROM submission_keys WHERE user_id = $1 AND key = $2
LIMIT 1
"""
SUBMISSION = """
SELECT s.*, l.name AS leaderboard_name, j.status AS job_status, j.error AS job_error,
       j.last_heartbeat AS job_last_heartbeat,
       (SELECT p.detail FROM precheck_verdicts p WHERE p.submission_id = s.id AND p.outcome = 'warn')
           AS precheck_warning
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id LEFT JOIN jobs j ON j.submission_id = s.id
WHERE s.id = $1 AND NOT s.deleted
"""
# Stages of one run share recorded_seq and may share start times: then the harness order decides (docs/authoring.md).
RUN_ORDER = """
ORDER BY recorded_seq, start_time,
         CASE WHEN stage = 'test' THEN 0 WHEN stage = 'benchmark' THEN 1 WHEN stage = 'leaderboard' THEN 3 ELSE 2 END,
         length(stage), stage
"""
SUBMISSION_RUNS = f"SELECT * FROM runs WHERE submission_id = $1 {RUN_ORDER}"
SUBMISSION_STATE = """
SELECT s.deleted, s.done, s.status, j.status AS job_status, j.error AS job_error
FROM submissions s LEFT JOIN jobs j ON j.submission_id = s.id WHERE s.id = $1
"""
RUN_REQUESTS = """
SELECT run_id, gpu, mode, secret, status, backend, error, success, result_error, system
FROM run_requests WHERE submission_id = $1 ORDER BY requested_at, run_id
"""
USER_SUBMISSIONS = """
SELECT s.id, s.file_name, s.submitted_at, s.done, l.name AS leaderboard_name,
       COALESCE((SELECT json_agg(json_build_object('gpu_type', sc.gpu, 'score', sc.score) ORDER BY sc.gpu)
                 FROM scores sc WHERE sc.submission_id = s.id AND s.status <> 'hacked'), '[]'::json) AS runs
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id
WHERE s.user_id = $1 AND NOT s.deleted AND ($2::integer IS NULL OR s.leaderboard_id = $2)
ORDER BY s.submitted_at DESC, s.id DESC LIMIT $3 OFFSET $4
"""
# Judged once the dispatcher rejected it, or accepted it and its runs are recorded (so the queue counts it).
DECISION = """
SELECT s.status, s.done, EXISTS (SELECT 1 FROM run_requests r WHERE r.submission_id = s.id) AS planned
FROM submissions s WHERE s.id = $1
"""
REJECTION = """
SELECT payload FROM event_archive WHERE correlation_id = $1 AND event_type = 'SubmissionRejected'
ORDER BY stream_seq LIMIT 1
"""


async def next_submission_id(pool: asyncpg.Pool) -> int:
    return await pool.fetchval(NEXT_SUBMISSION_ID)


async def submission_for_key(pool: asyncpg.Pool, user_id: str, key: str) -> int:
    """The submission id this user's idempotency key stands for, taken on first use."""
    for _ in range(3):  # a concurrent first use commits between our insert and our read: read again
        found = await pool.fetchval(SUBMISSION_FOR_KEY, user_id, key)
        if found is not None:
            return found
    raise RuntimeError("idempotency key could not be resolved")


async def was_deleted(pool: asyncpg.Pool, submission_id: int) -> bool:
    return bool(await pool.fetchval(WAS_DELETED, submission_id))


async def submission(pool: asyncpg.Pool, submission_id: int):
    if abs(submission_id) > MAX_BIGINT:
        return None
    return await pool.fetchrow(SUBMISSION, submission_id)


async def submission_state(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetchrow(SUBMISSION_STATE, submission_id)


async def run_requests(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetch(RUN_REQUESTS, submission_id)


async def user_submissions(pool: asyncpg.Pool, user_id: str, leaderboard_id: int | None, limit: int, offset: int):
    return await pool.fetch(USER_SUBMISSIONS, user_id, leaderboard_id, limit, min(offset, MAX_BIGINT))


async def submission_runs(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetch(SUBMISSION_RUNS, submission_id)


async def decision(pool: asyncpg.Pool, submission_id: int):
    return await pool.fetchrow(DECISION, submission_id)


async def rejection(pool: asyncpg.Pool, submission_id: int) -> dict | None:
    return await pool.fetchval(REJECTION, str(submission_id))
