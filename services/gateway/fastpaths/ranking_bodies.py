"""The JSON bodies of a ranking and of a count (docs/http-api.md "Public reads"), rendered for the standings cache.

One home for both the routes and the hot path in front of them (rankings.py), which render on a miss the same bytes
under the same variant key.
"""

from __future__ import annotations

from collections.abc import Hashable

import asyncpg
from fastapi.responses import JSONResponse

from services.core.presentation import views
from services.core.readmodel import standing_reads
from services.core.rules.noise import RunIntervals
from services.gateway.fastpaths.standings_cache import Render

# Every ranking this process renders, the web page's included, tells its entries' intervals from here.
INTERVALS = RunIntervals()


def ranking_variant(limit: int | None, offset: int) -> Hashable:
    return ("ranking", limit, offset)


def count_variant(user_id: str | None) -> Hashable:
    return ("count", user_id)


def _json(content) -> bytes:
    """The bytes FastAPI answers a route's value with. The views are plain JSON values already (strings, numbers,
    lists, None): FastAPI's jsonable_encoder would only copy them, at a quarter of a render's cost."""
    return JSONResponse(content).body


def renderer(pool: asyncpg.Pool, board, gpu: str, variant: Hashable) -> Render:
    """What renders `variant` (a ranking_variant or count_variant) of (board, GPU) from the standings."""
    kind, *arguments = variant  # type: ignore[misc]
    board_id, board_name = board["id"], board["name"]
    if kind == "ranking":
        limit, offset = arguments

        async def ranking() -> bytes:
            # the entry above the page too: whether the page's first entry ties is told against it (core/noise.py)
            above, rows = await standing_reads.ranking_with_results(pool, board_id, gpu, limit, offset,
                                                                     INTERVALS.knows)
            ranking_by = rows[0]["ranking_by"] if rows else ""
            noise = INTERVALS.noise(([above] if above else []) + rows, ranking_by)
            return _json([views.ranking_entry(row, board_name, gpu, entry_noise)
                          for row, entry_noise in zip(rows, noise[len(noise) - len(rows):], strict=True)])
        return ranking
    [user_id] = arguments

    async def count() -> bytes:
        return _json({"count": await standing_reads.submission_count(pool, board_id, gpu, user_id)})
    return count
