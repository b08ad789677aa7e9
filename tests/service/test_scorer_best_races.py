"""Two judgings committing at once: the best table keeps the better score, whichever transaction refreshes last
(each refreshes from what it sees; the per-key lock makes the later one see the other); and two new #1s of one board
announce the board in the order they took it (the board's lock)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from schemas.events import LeaderboardRankChanged, ScoreComputed
from services.kit.db import create_pool
from services.scorer import best, best_repository

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


async def improved(conn, event: ScoreComputed) -> bool:
    """An improvement in a transaction of its own, as a judging runs it."""
    async with conn.transaction():
        return await best_repository.improve(conn, event)


async def test_a_new_score_improves_the_best_only_when_better_and_only_while_its_submission_stands(service_database):
    pool = await create_pool(service_database, 1)
    try:
        async with pool.acquire() as conn:
            for submission_id in (11, 12, 13, 14):
                await conn.execute(SUBMISSION.replace("'ann'", "'bob'"), submission_id, AT, json.dumps([]))
            await best_repository.delete_submission(conn, 14)

            def bob(submission_id: int, score: float) -> ScoreComputed:
                return scored(submission_id, score).model_copy(update={"user_id": "bob", "user_name": "bob"})

            best = "SELECT submission_id, score FROM scorer_best WHERE user_id = 'bob'"
            assert await improved(conn, bob(11, 2.0))
            assert not await improved(conn, bob(12, 3.0))  # worse: kept, but not the best
            assert not await improved(conn, bob(11, 0.5))  # the first computed score stays
            assert not await improved(conn, bob(14, 0.1))  # its submission was deleted
            assert [tuple(r) for r in await conn.fetch(best)] == [(11, 2.0)]
            assert await improved(conn, bob(13, 1.0))
            assert [tuple(r) for r in await conn.fetch(best)] == [(13, 1.0)]
            # the scores kept are what a refresh recomputes from: the same row
            async with conn.transaction():
                await best_repository.refresh(conn, [("b", "cpu", "bob")])
            assert [tuple(r) for r in await conn.fetch(best)] == [(13, 1.0)]
    finally:
        await pool.close()


async def test_an_improvement_and_a_deletion_refresh_at_once_keep_the_new_best(service_database):
    pool = await create_pool(service_database, 2)
    try:
        async with pool.acquire() as first, pool.acquire() as second:
            for submission_id in (21, 22):
                await first.execute(SUBMISSION.replace("'ann'", "'cy'"), submission_id, AT, json.dumps([]))

            def cy(submission_id: int, score: float) -> ScoreComputed:
                return scored(submission_id, score).model_copy(update={"user_id": "cy", "user_name": "cy"})

            assert await improved(first, cy(21, 2.0))
            improving = first.transaction()
            await improving.start()
            assert await best_repository.improve(first, cy(22, 1.0))
            deleting = second.transaction()
            await deleting.start()
            await best_repository.delete_submission(second, 21)
            # recomputes the key from what it sees: it must wait for the improvement, then see its score
            refreshing = asyncio.ensure_future(best_repository.refresh(second, [("b", "cpu", "cy")]))
            await blocked(first, second.get_server_pid())
            await improving.commit()
            await refreshing
            await deleting.commit()
            rows = await first.fetch("SELECT submission_id, score FROM scorer_best WHERE user_id = 'cy'")
            assert [tuple(r) for r in rows] == [(22, 1.0)]
    finally:
        await pool.close()


async def test_two_new_tops_judged_at_once_each_announce_the_board_the_other_left(service_database):
    """Two users' new #1s judged in two transactions at once: the later one reads the board after the earlier one's
    commit, so its rank change names the earlier #1 as the one it displaced. Without the board's lock both read the
    board as it was before either, and Discord would announce two #1s, each displacing the old one."""
    pool = await create_pool(service_database, 2)

    def top_change(board, gpu, top, previous):
        return LeaderboardRankChanged(leaderboard=board, gpu=gpu, top=top, previous_top=previous,
                                      caused_by_submission=top[0].submission_id)

    def of(user: str, submission_id: int, score: float) -> ScoreComputed:
        return scored(submission_id, score).model_copy(update={"user_id": user, "user_name": user})

    try:
        async with pool.acquire() as first, pool.acquire() as second:
            for submission_id, user in ((31, "old"), (32, "dee"), (33, "eve")):
                await first.execute(SUBMISSION.replace("'ann'", f"'{user}'"), submission_id, AT, json.dumps([]))
            async with first.transaction():
                await best.scored(first, of("old", 31, 3.0), top_change)
            earlier = first.transaction()
            await earlier.start()
            [dee] = await best.scored(first, of("dee", 32, 2.0), top_change)
            later = second.transaction()
            await later.start()
            judging = asyncio.ensure_future(best.scored(second, of("eve", 33, 1.0), top_change))
            await blocked(first, second.get_server_pid())
            await earlier.commit()
            [eve] = await judging
            await later.commit()
            assert [e.user_id for e in dee.top] == ["dee", "old"]
            assert [e.user_id for e in eve.previous_top] == ["dee", "old"]
            assert [e.user_id for e in eve.top] == ["eve", "dee", "old"]
    finally:
        await pool.close()
