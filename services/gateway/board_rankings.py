"""What `GET /leaderboard/{leaderboard_id}/rankings` reads (kernelboard's rankings call, upstream KernelBot #493):
a board by its id, and how many submissions each user made on each of its GPUs. The ranking itself is the one every
ranking route reads (services/core/readmodel/standing_reads.py)."""

from __future__ import annotations

import asyncpg

BOARD_BY_ID = "SELECT * FROM leaderboards WHERE id = $1"
# Upstream counts every submission of the user on the board that has a run on the GPU, ranked or not.
SUBMISSION_COUNTS = """
SELECT s.user_id, r.gpu, count(DISTINCT s.id) AS submissions
FROM submissions s JOIN run_requests r ON r.submission_id = s.id
WHERE s.leaderboard_id = $1 AND NOT s.deleted
GROUP BY s.user_id, r.gpu
"""


async def board_by_id(pool: asyncpg.Pool, leaderboard_id: int):
    return await pool.fetchrow(BOARD_BY_ID, leaderboard_id)


async def submission_counts(pool: asyncpg.Pool, leaderboard_id: int) -> dict[tuple[str, str], int]:
    """(user id, GPU) -> submissions."""
    return {(row["user_id"], row["gpu"]): row["submissions"]
            for row in await pool.fetch(SUBMISSION_COUNTS, leaderboard_id)}
