"""Public reads: leaderboards, their GPUs, rankings, counts and queues (docs/http-api.md "Public reads")."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from services.core.presentation import views
from services.core.readmodel import board_reads, queue_reads, standing_reads, user_reads
from services.gateway import board_rankings
from services.gateway.deps import Cache, OptionalUser, Pool, QuietUser
from services.gateway.fastpaths.ranking_bodies import count_variant, ranking_variant, renderer
from services.gateway.fastpaths.standings_cache import json_response
from services.gateway.policy import boards
from services.gateway.responses import Count, Leaderboard, RankingEntry, RunnerQueue, documents

# Cached answers carry an ETag; a client sending it back in If-None-Match gets 304 while the standings stand still.
CACHED = {304: {"description": "Not Modified: the ETag sent in If-None-Match is still current"}}

router = APIRouter()


@router.get("/leaderboards", responses=documents(list[Leaderboard]))
async def list_leaderboards(pool: Pool, user: QuietUser) -> list[dict]:
    """Every leaderboard; a closed one shows its task only to a caller holding an invite to it."""
    rows = await board_reads.leaderboards(pool)
    invited = await user_reads.invited_boards(pool, user.user_id) if user is not None else set()
    return [views.leaderboard(row, accessible=row["visibility"] == "public" or row["id"] in invited) for row in rows]


@router.get("/gpus/{leaderboard}")
async def list_gpus(leaderboard: str, pool: Pool, user: OptionalUser) -> list[str]:
    board = await boards.readable(pool, leaderboard, user)
    return sorted(board["gpus"])


# Both answer from the standings cache with an ETag; who may see the board is checked first, on every request.
@router.get("/submissions/{leaderboard}/{gpu}", responses={**CACHED, **documents(list[RankingEntry])})
async def ranking(request: Request, leaderboard: str, gpu: str, pool: Pool, cache: Cache, user: OptionalUser,
                  limit: int | None = None, offset: int = 0) -> list[dict]:
    """The ranking, best first. Each entry has `score_interval`, the 95% interval of its score in seconds (null when
    its run reported no errors), and `tied_within_noise`: true when that interval overlaps the one of the entry
    ranked just above, so the two are the same within noise (docs/quickstart.md)."""
    if limit is not None and not 1 <= limit <= 1000:
        raise HTTPException(400, "limit must be between 1 and 1000")
    if offset < 0:
        raise HTTPException(400, "offset must be >= 0")
    board = await boards.readable_standings(pool, leaderboard, gpu, user)
    boards.ranked_gpu(board, gpu)
    variant = ranking_variant(limit, offset)
    return await json_response(request, cache, board, gpu, variant, renderer(pool, board, gpu, variant))


@router.get("/submission_count/{leaderboard}/{gpu}", responses={**CACHED, **documents(Count)})
async def submission_count(request: Request, leaderboard: str, gpu: str, pool: Pool, cache: Cache,
                           user: OptionalUser, user_id: str | None = None) -> dict:
    """Distinct ranked users; with `user_id`, that user's eligible runs."""
    board = await boards.readable_standings(pool, leaderboard, gpu, user)
    boards.ranked_gpu(board, gpu)
    variant = count_variant(user_id)
    return await json_response(request, cache, board, gpu, variant, renderer(pool, board, gpu, variant))


@router.get("/leaderboard/{leaderboard_id}/rankings")
async def rankings_by_id(leaderboard_id: int, pool: Pool, user: OptionalUser) -> dict:
    """A board's metadata and its ranking on every GPU, with each user's submission count: the shape kernelboard's
    leaderboard page reads (upstream KernelBot's rankings route). The ranking is the one /submissions serves."""
    board = await board_rankings.board_by_id(pool, leaderboard_id)
    if board is None:
        raise HTTPException(404, f"Leaderboard {leaderboard_id} not found")
    await boards.readable(pool, board["name"], user)
    counts = await board_rankings.submission_counts(pool, leaderboard_id)
    rankings = {}
    for gpu in sorted(board["gpus"]):
        rows = await standing_reads.ranking(pool, leaderboard_id, gpu, None, 0)
        rankings[gpu] = [views.board_rankings_entry(row, counts.get((str(row["user_id"]), gpu), 0)) for row in rows]
    return {"rankings": rankings, "leaderboard": views.board_rankings_board(board)}


@router.get("/runner_queue/{gpu}", responses=documents(RunnerQueue))
async def runner_queue(gpu: str, pool: Pool) -> dict:
    return views.runner_queue(gpu, await queue_reads.queue(pool, gpu))
