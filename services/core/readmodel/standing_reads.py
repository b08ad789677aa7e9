"""Rankings as the read model holds them: the standings (one row per user holding the best eligible score, kept by
the ledger), a page of them ranked, one user's standing, entry counts, and the ranking with what its noise is
computed from (services/core/rules/noise.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import asyncpg

from services.core.readmodel.submission_reads import MAX_BIGINT
from services.ranking.rules import ranks_ahead

# Rankings read the standings (migration 0030): one row per user holding the best eligible score, kept by the ledger
# (services/ranking/rules.py says what is eligible and best). A page costs O(limit + offset), whatever the history.
# Ranks are standard competition ranks, 1 + the number of better scores (rules.ranks_ahead): inside the page they
# follow from RANK(); the rows tied with the page's first row may have equals before the page, so theirs is counted.
STANDINGS_PAGE = """
SELECT submission_id, user_id, score, submitted_at, run_id, file_name, user_name FROM standings
WHERE leaderboard_id = $1 AND gpu = $2 ORDER BY score, submitted_at, submission_id LIMIT $3 OFFSET $4
"""
RANKING = f"""
WITH page AS ({STANDINGS_PAGE}), ranked AS (SELECT *, RANK() OVER (ORDER BY score) AS page_rank FROM page)
SELECT submission_id, user_id, score, submitted_at, run_id, file_name, user_name,
       CASE WHEN page_rank = 1 AND $4 > 0
            THEN 1 + (SELECT count(*) FROM standings b WHERE b.leaderboard_id = $1 AND b.gpu = $2
                      AND b.score < (SELECT min(score) FROM page))
            ELSE $4 + page_rank END AS rank
FROM ranked ORDER BY score, submitted_at, submission_id
"""
# One user's standing ranked as RANKING ranks it (ties share a rank): counting the rows ahead walks the standings_rank
# index up to the user's score, O(rank), where reading the ranking through to the user was O(board).
USER_STANDING = f"""
SELECT st.submission_id, st.user_id, st.score, st.submitted_at,
       1 + (SELECT count(*) FROM standings b WHERE b.leaderboard_id = $1 AND b.gpu = $2
                                              AND {ranks_ahead("b", "st")}) AS rank
FROM standings st WHERE st.leaderboard_id = $1 AND st.gpu = $2 AND st.user_id = $3
"""
SUBMISSION_COUNT = """
SELECT COALESCE((SELECT entries FROM standing_versions WHERE leaderboard_id = $1 AND gpu = $2), 0) AS users,
       COALESCE((SELECT eligible_runs FROM standings WHERE leaderboard_id = $1 AND gpu = $2 AND user_id = $3), 0)
           AS user_runs
"""
# RANKING's rows with each entry's leaderboard stage result map and the board's ranking rule, one primary-key read
# per row shown. The map comes as JSON text: a reader parses only the runs whose interval it has not kept
# (services/core/rules/noise.RunIntervals).
RANKING_WITH_RESULTS = f"""
WITH ranking AS ({RANKING})
SELECT b.*, (r.result -> 'run' -> 'result')::text AS stage_result,
       (SELECT l.ranking_by FROM leaderboards l WHERE l.id = $1) AS ranking_by
FROM ranking b LEFT JOIN runs r ON r.run_id = b.run_id AND r.stage = 'leaderboard'
ORDER BY b.score, b.submitted_at, b.submission_id
"""


# RANKING's rows with the board's ranking rule alone; the results a reader has not kept the interval of come from
# STAGE_RESULTS. While a board is live its page is read again at every move, and only the entry that moved is new:
# joining every shown entry's run (RANKING_WITH_RESULTS) cost most of a 500-row read.
RANKING_WITH_RULE = f"""
WITH ranking AS ({RANKING})
SELECT b.*, (SELECT l.ranking_by FROM leaderboards l WHERE l.id = $1) AS ranking_by
FROM ranking b ORDER BY b.score, b.submitted_at, b.submission_id
"""
STAGE_RESULTS = """
SELECT run_id, (result -> 'run' -> 'result')::text AS stage_result FROM runs
WHERE run_id = ANY($1::text[]) AND stage = 'leaderboard'
"""

Known = Callable[[str, str], bool]  # (run_id, ranking rule) -> the reader has kept that run's interval


async def ranking(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int | None, offset: int):
    return await pool.fetch(RANKING, leaderboard_id, gpu, limit, min(offset, MAX_BIGINT))


async def user_standing(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, user_id: str):
    """The user's standing on the board and GPU (their best submission and its rank); None when they have none."""
    return await pool.fetchrow(USER_STANDING, leaderboard_id, gpu, user_id)


async def submission_count(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, user_id: str | None) -> int:
    row = await pool.fetchrow(SUBMISSION_COUNT, leaderboard_id, gpu, user_id)
    return row["users"] if user_id is None else row["user_runs"]


async def ranking_with_results(pool: asyncpg.Pool, leaderboard_id: int, gpu: str, limit: int | None,
                               offset: int = 0, known: Known | None = None) -> tuple[Mapping | None, list[Mapping]]:
    """The entry just above the page at `offset` (None on the first page), whose interval says whether the page's
    first entry ties, and the page; each row with its `stage_result`, None for the runs `known` says are kept."""
    above = 1 if offset > 0 else 0
    arguments = (leaderboard_id, gpu, None if limit is None else limit + above, min(offset, MAX_BIGINT) - above)
    if known is None:
        rows: list[Mapping] = list(await pool.fetch(RANKING_WITH_RESULTS, *arguments))
    else:
        rows = await _unknown_results(pool, await pool.fetch(RANKING_WITH_RULE, *arguments), known)
    if not above:
        return None, rows
    return (rows[0], rows[1:]) if rows else (None, [])


async def _unknown_results(pool: asyncpg.Pool, rows, known: Known) -> list[Mapping]:
    unknown = [row["run_id"] for row in rows if row["run_id"] and not known(row["run_id"], row["ranking_by"])]
    results = dict(await pool.fetch(STAGE_RESULTS, unknown)) if unknown else {}
    return [{**row, "stage_result": results.get(row["run_id"])} for row in rows]
