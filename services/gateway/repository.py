"""SQL the gateway reads. The gateway writes nothing: every change travels as an event."""

from __future__ import annotations

import asyncpg

USER_BY_CLI = "SELECT user_id, user_name, banned FROM users WHERE cli_id = $1"
USER_BY_WEB = "SELECT user_id, user_name, banned FROM users WHERE web_auth_id = $1"
CLI_OWNER = "SELECT user_id FROM users WHERE cli_id = $1"
LEADERBOARD = "SELECT * FROM leaderboards WHERE lower(name) = lower($1)"
LEADERBOARDS = "SELECT * FROM leaderboards ORDER BY id"
NEXT_SUBMISSION_ID = "SELECT nextval('submission_ids')"
# Every read below leaves deleted submissions out (http-api.md §3.13); only the stream reads the flag itself.
SUBMISSION = """
SELECT s.*, l.name AS leaderboard_name, j.status AS job_status, j.error AS job_error,
       j.last_heartbeat AS job_last_heartbeat
FROM submissions s LEFT JOIN leaderboards l ON l.id = s.leaderboard_id LEFT JOIN jobs j ON j.submission_id = s.id
WHERE s.id = $1 AND NOT s.deleted
"""
# Stages of one run share recorded_seq and may share start times: then the harness order decides (harness.md §2).
SUBMISSION_RUNS = """
SELECT * FROM runs WHERE submission_id = $1
ORDER BY recorded_seq, start_time,
         CASE WHEN stage = 'test' THEN 0 WHEN stage = 'benchmark' THEN 1 WHEN stage = 'leaderboard' THEN 3 ELSE 2 END,
         length(stage), stage
"""
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
# scores holds exactly the eligible public runs (http-api.md §3.7), one per (submission, GPU)
ELIGIBLE = """
FROM scores sc JOIN submissions s ON s.id = sc.submission_id
WHERE sc.leaderboard_id = $1 AND sc.gpu = $2 AND s.status <> 'hacked' AND NOT s.deleted
"""
RANKING = f"""
WITH best AS (
    SELECT DISTINCT ON (sc.user_id) sc.submission_id, sc.user_id, sc.score, sc.submitted_at, s.file_name, s.user_name
    {ELIGIBLE}
    ORDER BY sc.user_id, sc.score, sc.submitted_at, sc.submission_id
)
SELECT *, RANK() OVER (ORDER BY score) AS rank FROM best
ORDER BY score, submitted_at, submission_id LIMIT $3 OFFSET $4
"""
SUBMISSION_COUNT = f"""
SELECT count(DISTINCT sc.user_id) AS users, count(*) FILTER (WHERE sc.user_id = $3) AS user_runs {ELIGIBLE}
"""
# A job is queued from the moment its submission is recorded until a run of it starts (so the 202 of a new
# submission already counts it), running until it ends.
QUEUE = """
SELECT count(*) FILTER (WHERE j.status IN ('initial', 'pending')) AS queued,
       count(*) FILTER (WHERE j.status = 'running') AS running,
       (SELECT backend FROM run_requests WHERE lower(gpu) = lower($1) AND backend IS NOT NULL
        ORDER BY requested_at DESC LIMIT 1) AS backend
FROM jobs j JOIN submissions s ON s.id = j.submission_id
WHERE j.status IN ('initial', 'pending', 'running') AND NOT s.deleted
  AND EXISTS (SELECT 1 FROM unnest(s.gpus) AS g WHERE lower(g) = lower($1))
"""
KNOWN_GPU = "SELECT g FROM leaderboards, unnest(gpus) AS g WHERE lower(g) = lower($1) LIMIT 1"
# Postgres bigint; larger ids name nothing and larger offsets skip everything.
MAX_BIGINT = 2**63 - 1


async def user_by_cli(pool: asyncpg.Pool, cli_id: str):
    return await pool.fetchrow(USER_BY_CLI, cli_id)


async def user_by_web(pool: asyncpg.Pool, web_id: str):
    return await pool.fetchrow(USER_BY_WEB, web_id)


async def cli_owner(pool: asyncpg.Pool, cli_id: str) -> str | None:
    return await pool.fetchval(CLI_OWNER, cli_id)


async def leaderboard(pool: asyncpg.Pool, name: str):
    return await pool.fetchrow(LEADERBOARD, name)


async def leaderboards(pool: asyncpg.Pool):
    return await pool.fetch(LEADERBOARDS)


async def next_submission_id(pool: asyncpg.Pool) -> int:
    return await pool.fetchval(NEXT_SUBMISSION_ID)


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


async def ranking(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int | None, offset: int):
    return await pool.fetch(RANKING, leaderboard_id, gpu, limit, min(offset, MAX_BIGINT))


async def submission_count(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, user_id: str | None) -> int:
    row = await pool.fetchrow(SUBMISSION_COUNT, leaderboard_id, gpu, user_id)
    return row["users"] if user_id is None else row["user_runs"]


async def has_invite(pool: asyncpg.Pool, user_id: str, leaderboard_id: int) -> bool:
    """Whether a claimed invite opens a closed leaderboard to this user. Invites are not projected yet (no
    InviteClaimed event exists), so nobody holds one: closed leaderboards stay closed to every user."""
    return False


async def ping(pool: asyncpg.Pool, timeout_s: float) -> None:
    await pool.fetchval("SELECT 1", timeout=timeout_s)


async def queue(pool: asyncpg.Pool, gpu: str):
    known = await pool.fetchval(KNOWN_GPU, gpu)
    if known is None:
        return None
    row = await pool.fetchrow(QUEUE, gpu)
    return known, row
