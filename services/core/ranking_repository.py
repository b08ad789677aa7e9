"""The ranking with what its noise is computed from (services/core/noise.py): the API's ranking rows (read_model.py)
with each entry's leaderboard stage result map and the board's ranking rule, one primary-key read per row shown."""

from __future__ import annotations

import asyncpg

from services.core.read_model import MAX_BIGINT
from services.core.read_model import RANKING as API_RANKING

RANKING_WITH_RESULTS = f"""
WITH ranking AS ({API_RANKING})
SELECT b.*, r.result -> 'run' -> 'result' AS stage_result,
       (SELECT l.ranking_by FROM leaderboards l WHERE l.id = $1) AS ranking_by
FROM ranking b LEFT JOIN runs r ON r.run_id = b.run_id AND r.stage = 'leaderboard'
ORDER BY b.score, b.submitted_at, b.submission_id
"""


async def ranking_with_results(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int | None,
                               offset: int = 0) -> tuple[asyncpg.Record | None, list[asyncpg.Record]]:
    """The entry just above the page at `offset` (None on the first page), whose interval says whether the page's
    first entry ties, and the page."""
    above = 1 if offset > 0 else 0
    rows = await pool.fetch(RANKING_WITH_RESULTS, leaderboard_id, gpu, None if limit is None else limit + above,
                            min(offset, MAX_BIGINT) - above)
    if not above:
        return None, list(rows)
    return (rows[0], list(rows[1:])) if rows else (None, [])
