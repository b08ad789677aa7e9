"""Public reads: leaderboards, their GPUs, rankings, counts and queues (http-api.md §3.4-§3.8)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from services.gateway import boards, repository, views
from services.gateway.deps import OptionalUser, Pool, QuietUser

router = APIRouter()


@router.get("/leaderboards")
async def list_leaderboards(pool: Pool, user: QuietUser) -> list[dict]:
    """Every leaderboard; a closed one shows its task only to a caller holding an invite to it."""
    rows = await repository.leaderboards(pool)
    invited = await repository.invited_boards(pool, user.user_id) if user is not None else set()
    return [views.leaderboard(row, accessible=row["visibility"] == "public" or row["id"] in invited) for row in rows]


@router.get("/gpus/{leaderboard}")
async def list_gpus(leaderboard: str, pool: Pool, user: OptionalUser) -> list[str]:
    board = await boards.readable(pool, leaderboard, user)
    return sorted(board["gpus"])


@router.get("/submissions/{leaderboard}/{gpu}")
async def ranking(leaderboard: str, gpu: str, pool: Pool, user: OptionalUser, limit: int | None = None,
                  offset: int = 0) -> list[dict]:
    if limit is not None and not 1 <= limit <= 1000:
        raise HTTPException(400, "limit must be between 1 and 1000")
    if offset < 0:
        raise HTTPException(400, "offset must be >= 0")
    board = await boards.readable(pool, leaderboard, user)
    boards.ranked_gpu(board, gpu)
    rows = await repository.ranking(pool, board["id"], gpu, limit, offset)
    return [views.ranking_entry(row, board["name"], gpu) for row in rows]


@router.get("/submission_count/{leaderboard}/{gpu}")
async def submission_count(leaderboard: str, gpu: str, pool: Pool, user: OptionalUser,
                           user_id: str | None = None) -> dict:
    """Distinct ranked users; with `user_id`, that user's eligible runs."""
    board = await boards.readable(pool, leaderboard, user)
    boards.ranked_gpu(board, gpu)
    return {"count": await repository.submission_count(pool, board["id"], gpu, user_id)}


@router.get("/runner_queue/{gpu}")
async def runner_queue(gpu: str, pool: Pool) -> dict:
    return views.runner_queue(gpu, await repository.queue(pool, gpu))
