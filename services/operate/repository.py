"""SQL the operator tools read: boards, ranked submissions for export, rejudge outcomes."""

from __future__ import annotations

import asyncpg

from services.ranking.rules import SUBMISSION_STANDS, best_first

BOARD = """
SELECT id, name, ranking_by, task_hash, gpus, visibility FROM leaderboards WHERE lower(name) = lower($1)
"""
ARCHIVED = "SELECT payload FROM event_archive WHERE event_id = $1 ORDER BY stream_seq LIMIT 1"
# Public scores only (the secret run's score is never exported), of submissions still standing; each row's rank is
# its user's rank on the board when it is that user's best entry, as the standings hold it.
RANKED = f"""
WITH eligible AS (
    SELECT sc.submission_id, sc.gpu, sc.score, sc.run_id, sc.user_id, s.user_name, s.file_name, s.code,
           s.submitted_at, l.name AS leaderboard,
           (SELECT r.harness_version FROM runs r WHERE r.run_id = sc.run_id AND r.harness_version <> ''
            ORDER BY r.stage LIMIT 1) AS harness_version
    FROM scores sc JOIN submissions s ON s.id = sc.submission_id JOIN leaderboards l ON l.id = sc.leaderboard_id
    WHERE sc.leaderboard_id = $1 AND ($2::text IS NULL OR sc.gpu = $2) AND {SUBMISSION_STANDS}
), ranked AS (
    SELECT submission_id, gpu, RANK() OVER (PARTITION BY gpu ORDER BY score) AS rank
    FROM standings WHERE leaderboard_id = $1 AND ($2::text IS NULL OR gpu = $2)
)
SELECT e.*, r.rank FROM eligible e LEFT JOIN ranked r USING (submission_id, gpu)
ORDER BY e.gpu, {best_first("e")}
"""


async def board(conn: asyncpg.Connection, name: str):
    return await conn.fetchrow(BOARD, name)


async def archived(conn: asyncpg.Connection, event_id: str) -> dict | None:
    return await conn.fetchval(ARCHIVED, event_id)


async def ranked_submissions(conn: asyncpg.Connection, leaderboard_id: int, gpu: str | None):
    return await conn.fetch(RANKED, leaderboard_id, gpu)


RANKED_COUNT = """
SELECT count(DISTINCT sc.submission_id) FROM scores sc JOIN leaderboards l ON l.id = sc.leaderboard_id
WHERE lower(l.name) = lower($1) AND ($2::text IS NULL OR sc.gpu = $2)
"""


async def ranked_count(conn: asyncpg.Connection, leaderboard: str, gpu: str | None) -> int:
    return await conn.fetchval(RANKED_COUNT, leaderboard, gpu)


# A rerun repeats what ranks: the submissions with a score on the board (on the GPU asked for), with their code.
RERUN_SUBMISSIONS = """
SELECT s.id AS submission_id, s.code, array_agg(sc.gpu ORDER BY sc.gpu) AS gpus
FROM scores sc JOIN submissions s ON s.id = sc.submission_id JOIN leaderboards l ON l.id = sc.leaderboard_id
WHERE lower(l.name) = lower($1) AND ($2::text IS NULL OR sc.gpu = $2) AND NOT s.deleted
GROUP BY s.id, s.code ORDER BY s.id
"""


async def rerun_submissions(conn: asyncpg.Connection, leaderboard: str, gpu: str | None):
    return await conn.fetch(RERUN_SUBMISSIONS, leaderboard, gpu)
