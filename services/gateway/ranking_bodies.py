"""The JSON bodies of a ranking and of a count (http-api.md §3.7, §3.8), rendered for the standings cache.

One home for both the routes and the hot path in front of them (hot_reads.py), which render on a miss the same bytes
under the same variant key.
"""

from __future__ import annotations

from collections.abc import Hashable

import asyncpg
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from services.core import read_model as repository
from services.core import views
from services.gateway.standings_cache import Render


def ranking_variant(limit: int | None, offset: int) -> Hashable:
    return ("ranking", limit, offset)


def count_variant(user_id: str | None) -> Hashable:
    return ("count", user_id)


def _json(content) -> bytes:
    return JSONResponse(jsonable_encoder(content)).body


def renderer(pool: asyncpg.Pool, board, gpu: str, variant: Hashable) -> Render:
    """What renders `variant` (a ranking_variant or count_variant) of (board, GPU) from the standings."""
    kind, *arguments = variant  # type: ignore[misc]
    board_id, board_name = board["id"], board["name"]
    if kind == "ranking":
        limit, offset = arguments

        async def ranking() -> bytes:
            rows = await repository.ranking(pool, board_id, gpu, limit, offset)
            return _json([views.ranking_entry(row, board_name, gpu) for row in rows])
        return ranking
    [user_id] = arguments

    async def count() -> bytes:
        return _json({"count": await repository.submission_count(pool, board_id, gpu, user_id)})
    return count
