"""Public reads: leaderboards, rankings, queues (http-api.md §3.4, §3.6, §3.7)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from services.gateway import repository, views
from services.gateway.deps import Pool

router = APIRouter()


@router.get("/leaderboards")
async def list_leaderboards(pool: Pool) -> list[dict]:
    rows = await repository.leaderboards(pool)
    return [views.leaderboard(row, accessible=row["visibility"] == "public") for row in rows]


@router.get("/submissions/{leaderboard}/{gpu}")
async def ranking(leaderboard: str, gpu: str, pool: Pool, limit: int | None = None, offset: int = 0) -> list[dict]:
    if limit is not None and not 1 <= limit <= 1000:
        raise HTTPException(400, "limit must be between 1 and 1000")
    if offset < 0:
        raise HTTPException(400, "offset must be >= 0")
    board = await repository.leaderboard(pool, leaderboard)
    if board is None:
        raise HTTPException(404, f"Leaderboard `{leaderboard}` does not exist.")
    if board["visibility"] != "public":
        raise HTTPException(401, "Authentication required for closed leaderboard")
    if gpu not in board["gpus"]:
        supported = ", ".join(sorted(board["gpus"]))
        raise HTTPException(400, f"GPU type '{gpu}' is not supported for leaderboard '{board['name']}'. "
                                 f"Supported GPUs: {supported}")
    rows = await repository.ranking(pool, board["id"], gpu, limit, offset)
    return [views.ranking_entry(row, board["name"], gpu) for row in rows]


@router.get("/runner_queue/{gpu}")
async def runner_queue(gpu: str, pool: Pool) -> dict:
    return views.runner_queue(gpu, await repository.queue(pool, gpu))
