"""SQL of the scorer: planned runs, run verdicts, and each board's best score per user."""

from __future__ import annotations

from dataclasses import asdict

import asyncpg

from schemas.events import PlannedRun, SubmissionAccepted
from services.scorer.scoring import BoardEntry, RunVerdict

LOCK_SUBMISSION = "SELECT pg_advisory_xact_lock(8231, $1::int)"
SUBMISSION_INSERT = """
INSERT INTO scorer_submissions (submission_id, leaderboard, user_id, user_name, mode, ranking_by, submitted_at,
                                planned_runs)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING
"""
SUBMISSION = "SELECT * FROM scorer_submissions WHERE submission_id = $1"
RUN_INSERT = """
INSERT INTO scorer_runs (run_id, submission_id, gpu, mode, secret, outcome) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (run_id) DO NOTHING RETURNING 1
"""
VERDICTS = "SELECT run_id, outcome FROM scorer_runs WHERE submission_id = $1"
MARK_FINISHED = "UPDATE scorer_submissions SET finished = true WHERE submission_id = $1"
TOP = """
SELECT user_id, user_name, score, submission_id FROM scorer_best WHERE leaderboard = $1 AND gpu = $2
ORDER BY score, submitted_at, submission_id LIMIT $3
"""
BEST_UPSERT = """
INSERT INTO scorer_best (leaderboard, gpu, user_id, user_name, score, submission_id, submitted_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (leaderboard, gpu, user_id) DO UPDATE
SET score = EXCLUDED.score, submission_id = EXCLUDED.submission_id, submitted_at = EXCLUDED.submitted_at,
    user_name = EXCLUDED.user_name
WHERE EXCLUDED.score < scorer_best.score
"""


async def lock_submission(conn: asyncpg.Connection, submission_id: int) -> None:
    """Serialise every decision about one submission, whichever of its events arrives first."""
    await conn.execute(LOCK_SUBMISSION, submission_id % 2_000_000_000)


async def add_submission(conn: asyncpg.Connection, event: SubmissionAccepted) -> None:
    await conn.execute(
        SUBMISSION_INSERT, event.submission_id, event.leaderboard, event.user_id, event.user_name, event.mode,
        event.ranking_by, event.submitted_at, [r.model_dump() for r in event.runs],
    )


async def submission(conn: asyncpg.Connection, submission_id: int):
    row = await conn.fetchrow(SUBMISSION, submission_id)
    if row is None:
        return None
    planned = [PlannedRun.model_validate(r) for r in row["planned_runs"]]
    return row, planned


async def add_verdict(conn: asyncpg.Connection, run_id: str, submission_id: int, gpu: str, mode: str, secret: bool,
                      verdict: RunVerdict) -> bool:
    """False when this run already has a verdict (a duplicate report)."""
    return await conn.fetchval(RUN_INSERT, run_id, submission_id, gpu, mode, secret, asdict(verdict)) is not None


async def verdicts(conn: asyncpg.Connection, submission_id: int) -> dict[str, RunVerdict]:
    rows = await conn.fetch(VERDICTS, submission_id)
    return {r["run_id"]: RunVerdict(**r["outcome"]) for r in rows}


async def mark_finished(conn: asyncpg.Connection, submission_id: int) -> None:
    await conn.execute(MARK_FINISHED, submission_id)


async def top(conn: asyncpg.Connection, leaderboard: str, gpu: str, n: int = 3) -> list[BoardEntry]:
    return [BoardEntry(**dict(r)) for r in await conn.fetch(TOP, leaderboard, gpu, n)]


async def offer_best(conn: asyncpg.Connection, leaderboard: str, gpu: str, entry: BoardEntry, submitted_at) -> None:
    await conn.execute(BEST_UPSERT, leaderboard, gpu, entry.user_id, entry.user_name, entry.score,
                       entry.submission_id, submitted_at)

