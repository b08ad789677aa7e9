"""SQL of the operator tools and the admin use cases: boards, ranked submissions and the export log of the open-data
export, archived events for a rejudge, pre-check verdicts, policies and floor holds."""

from __future__ import annotations

import asyncpg

from services.ranking.rules import SUBMISSION_STANDS, best_first

BOARD = """
SELECT id, name, ranking_by, task_hash, gpus, visibility FROM leaderboards WHERE lower(name) = lower($1)
"""
BOARD_BY_ID = "SELECT id, name, deadline, visibility FROM leaderboards WHERE id = $1"
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


async def board_by_id(conn: asyncpg.Connection, board_id: int):
    return await conn.fetchrow(BOARD_BY_ID, board_id)


# Scheduled exports: one replica at a time (a transaction-scoped advisory lock), once per interval.
EXPORT_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('kernelbot-hf-export'))"
LAST_EXPORT = """
SELECT max(finished_at) FILTER (WHERE error IS NULL) AS succeeded, max(finished_at) AS tried FROM hf_exports
"""
RECORD_EXPORT = "INSERT INTO hf_exports (repo_id, filename, rows, error) VALUES ($1, $2, $3, $4)"


async def take_export_lock(conn: asyncpg.Connection) -> bool:
    return await conn.fetchval(EXPORT_LOCK)


async def last_export(conn: asyncpg.Connection):
    """When the last export succeeded, and when the last one was tried (None: never)."""
    row = await conn.fetchrow(LAST_EXPORT)
    return row["succeeded"], row["tried"]


async def record_export(conn: asyncpg.Connection, repo_id: str, filename: str, rows: int, error: str | None) -> None:
    await conn.execute(RECORD_EXPORT, repo_id, filename, rows, error)


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


PRECHECK_VERDICT = "SELECT * FROM precheck_verdicts WHERE submission_id = $1"
SUBMISSION_STATUS = "SELECT status FROM submissions WHERE id = $1 AND NOT deleted"
PRECHECK_POLICY = """
SELECT p.outcomes FROM precheck_policies p JOIN leaderboards l ON l.id = p.leaderboard_id
WHERE lower(l.name) = lower($1)
"""


async def precheck_verdict(conn, submission_id: int):
    if abs(submission_id) > 2**63 - 1:
        return None
    return await conn.fetchrow(PRECHECK_VERDICT, submission_id)


async def submission_status(conn, submission_id: int) -> str | None:
    return await conn.fetchval(SUBMISSION_STATUS, submission_id)


async def precheck_policy(conn, leaderboard: str) -> dict[str, str]:
    return await conn.fetchval(PRECHECK_POLICY, leaderboard) or {}


# The floor's holds (ScoreHeld) of a submission, each cleared once a PrecheckCleared of it came later in the log.
FLOOR_HOLDS = """
SELECT h.payload, EXISTS (SELECT 1 FROM event_archive c WHERE c.correlation_id = h.correlation_id
                                 AND c.event_type = 'PrecheckCleared' AND c.stream_seq > h.stream_seq) AS cleared
FROM event_archive h WHERE h.correlation_id = $1 AND h.event_type = 'ScoreHeld' ORDER BY h.stream_seq
"""
HAS_SCORE = "SELECT EXISTS (SELECT 1 FROM scores WHERE submission_id = $1)"


async def floor_holds(conn, submission_id: int) -> list[dict]:
    """Each held score as its ScoreHeld says it, with `cleared`."""
    rows = await conn.fetch(FLOOR_HOLDS, str(submission_id))
    return [{**row["payload"], "cleared": row["cleared"]} for row in rows]


async def has_score(conn, submission_id: int) -> bool:
    return await conn.fetchval(HAS_SCORE, submission_id)
