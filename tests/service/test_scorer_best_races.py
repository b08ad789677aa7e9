"""Two judgings of one user's submissions committing at once: the best table keeps the better score, whichever
transaction refreshes last (each refreshes from what it sees; the per-key lock makes the later one see the other)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from schemas.events import ScoreComputed
from services.kit.db import create_pool
from services.scorer import best_repository

AT = datetime(2026, 11, 1, tzinfo=UTC)
SUBMISSION = """
INSERT INTO scorer_submissions (submission_id, leaderboard, user_id, user_name, mode, ranking_by, submitted_at,
                                planned_runs, finished)
VALUES ($1, 'b', 'ann', 'ann', 'leaderboard', 'last', $2, $3, true)
"""


def scored(submission_id: int, score: float) -> ScoreComputed:
    return ScoreComputed(submission_id=submission_id, leaderboard="b", gpu="cpu", user_id="ann", user_name="ann",
                         run_id=f"{submission_id}-pub", score=score, ranking_by="last", submitted_at=AT)


async def blocked(observer, pid: int) -> None:
    """Until the backend `pid` waits on a lock (the second refresh has reached the first one's key)."""
    for _ in range(500):
        if await observer.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the second refresh never waited on the first")


async def test_the_better_of_two_scores_judged_at_once_stands(service_database):
    pool = await create_pool(service_database, 2)
    try:
        async with pool.acquire() as first, pool.acquire() as second:
            for submission_id in (1, 2):
                await first.execute(SUBMISSION, submission_id, AT, json.dumps([]))
            better = first.transaction()
            await better.start()
            await best_repository.refresh(first, await best_repository.record(first, [scored(1, 1.0)]))
            worse = second.transaction()
            await worse.start()
            keys = await best_repository.record(second, [scored(2, 2.0)])
            # waits on the first transaction's key, then sees its score
            refreshing = asyncio.ensure_future(best_repository.refresh(second, keys))
            await blocked(first, second.get_server_pid())
            assert not refreshing.done()
            await better.commit()
            await refreshing
            await worse.commit()
            assert [tuple(r) for r in await first.fetch("SELECT submission_id, score FROM scorer_best")] == [(1, 1.0)]
    finally:
        await pool.close()
