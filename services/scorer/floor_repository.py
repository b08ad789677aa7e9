"""SQL the floor's review reads (services/scorer/holds.py): the board's best entry and its case means."""

from __future__ import annotations

import asyncpg

from services.ranking.rules import best_first

BOARD_BEST = f"""
SELECT score, submission_id FROM scorer_best WHERE leaderboard = $1 AND gpu = $2 ORDER BY {best_first()} LIMIT 1
"""
CASE_MEANS = """
SELECT outcome -> 'case_means_ns' FROM scorer_runs
WHERE submission_id = $1 AND gpu = $2 AND mode = 'leaderboard' AND NOT secret LIMIT 1
"""


async def board_best(conn: asyncpg.Connection, leaderboard: str, gpu: str) -> tuple[float, int] | None:
    row = await conn.fetchrow(BOARD_BEST, leaderboard, gpu)
    return (row["score"], row["submission_id"]) if row else None


async def case_means(conn: asyncpg.Connection, submission_id: int, gpu: str) -> list[float] | None:
    """The public ranked run's benchmark means in ns; None where its verdict predates recording them."""
    found = await conn.fetchval(CASE_MEANS, submission_id, gpu)
    return [float(m) for m in found] if found else None
