"""SQL the floor's review reads (services/scorer/holds.py): the board's best entry, and the case means of its
ranked entries."""

from __future__ import annotations

import asyncpg

from services.ranking.rules import best_first

BOARD_BEST = f"""
SELECT score, submission_id FROM scorer_best WHERE leaderboard = $1 AND gpu = $2 ORDER BY {best_first()} LIMIT 1
"""
# The board's best REFERENCE_ENTRIES ranked entries (one per user, scorer_best_rank's order): the floor's median is
# taken over them, so judging a score costs the same on a board of ten entries or of ten thousand. Each entry's means
# are those of the run its score came from, the one its submission's plan names: after a rerun a submission has two
# public ranked runs, and an arbitrary one of them made a live judgement and its replay differ.
REFERENCE_ENTRIES = 101
BOARD_CASE_MEANS = f"""
SELECT (SELECT r.outcome -> 'case_means_ns' FROM scorer_runs r
        WHERE r.submission_id = b.submission_id AND r.gpu = b.gpu AND r.mode = 'leaderboard' AND NOT r.secret
          AND r.run_id IN (SELECT planned ->> 'run_id' FROM jsonb_array_elements(s.planned_runs) planned)) AS means
FROM scorer_best b JOIN scorer_submissions s ON s.submission_id = b.submission_id
WHERE b.leaderboard = $1 AND b.gpu = $2 ORDER BY {best_first("b")} LIMIT $3
"""


async def board_best(conn: asyncpg.Connection, leaderboard: str, gpu: str) -> tuple[float, int] | None:
    row = await conn.fetchrow(BOARD_BEST, leaderboard, gpu)
    return (row["score"], row["submission_id"]) if row else None


async def board_case_means(conn: asyncpg.Connection, leaderboard: str, gpu: str) -> list[list[float] | None]:
    """Each ranked entry's public ranked run's benchmark means in ns (best entries first); None for an entry whose
    verdict predates recording them."""
    rows = await conn.fetch(BOARD_CASE_MEANS, leaderboard, gpu, REFERENCE_ENTRIES)
    return [[float(m) for m in row["means"]] if row["means"] else None for row in rows]
