"""The hot path of a public board's ranking and count: answered from the standings cache before routing.

Near a deadline everyone refreshes the same rankings; FastAPI's routing and dependency solving cost more than the
answer itself. This fast path serves a GET of a public board's ranking or count on one of its GPUs, with well-formed
parameters: from the cache, from the render in flight, or by rendering it once for everyone waiting (or a 304 when the
client holds the current ETag). It runs in front of the application's middleware (base.py). Everything else (a closed board, an error of any kind) goes on to the routes in
services/gateway/routes/leaderboards.py, which check access and use the same cache.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.types import Scope, Send

from services.core.readmodel import board_reads
from services.gateway.fastpaths.base import FastPath, header
from services.gateway.fastpaths.coalesce import Coalesced
from services.gateway.fastpaths.ranking_bodies import count_variant, ranking_variant, renderer
from services.gateway.fastpaths.standings_cache import CACHE_CONTROL_PUBLIC, StandingsCache, etag

if TYPE_CHECKING:  # the state holds the standings cache: a runtime import would go round in a circle
    from services.gateway.state import GatewayState

PATH = re.compile(r"^/(submissions|submission_count)/([^/]+)/([^/]+)$")
# The route templates, so request metrics label a hit as the route it stands for.
ROUTES = {"submissions": "/submissions/{leaderboard}/{gpu}", "submission_count": "/submission_count/{leaderboard}/{gpu}"}
NUMBER = re.compile(r"^[0-9]{1,18}$")


def variant(kind: str, query_string: bytes) -> Hashable | None:
    """The cache variant the route would use for these parameters; None when only the route can tell."""
    try:
        pairs = parse_qsl(query_string.decode("ascii"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return None
    params = dict(pairs)
    if len(params) != len(pairs):
        return None  # a repeated parameter: the route decides which one counts
    if kind == "submission_count":
        user_id = params.get("user_id")
        return None if user_id == "" else count_variant(user_id)
    limit, offset = params.get("limit"), params.get("offset", "0")
    if not NUMBER.match(offset) or (limit is not None and not NUMBER.match(limit)):
        return None
    if limit is not None and not 1 <= int(limit) <= 1000:
        return None
    return ranking_variant(None if limit is None else int(limit), int(offset))


class RankingFastPath(FastPath):
    def __init__(self, state: GatewayState) -> None:
        super().__init__(state)
        self._boards = Coalesced(lambda name, gpu: board_reads.board_standing(state.pool, name, gpu))

    async def answered(self, scope: Scope, send: Send) -> bool:
        match = PATH.match(scope["path"])
        if match is None:
            return False
        kind, name, gpu = match.groups()
        wanted = variant(kind, scope["query_string"])
        if wanted is None:
            return False
        state = self.state
        board = await self._boards.get(name, gpu)
        if board is None or board["visibility"] != "public" or gpu not in board["gpus"]:
            return False
        cache: StandingsCache = state.standings_cache
        version = board["standing_version"]
        tag = etag(board["id"], gpu, version, wanted)
        held = header(scope, b"if-none-match")
        if held is not None and tag.encode() in {t.strip().removeprefix(b"W/") for t in held.split(b",")}:
            await self._send(scope, send, 304, tag, b"")
            return True
        entry = cache.get(board["id"], gpu, version, wanted)
        if entry is None:
            try:
                entry = await cache.rendered(board["id"], gpu, version, wanted,
                                             renderer(state.pool, board, gpu, wanted))
            except Exception:  # noqa: BLE001 - the route renders again and answers the failure as it answers any
                return False
        await self._send(scope, send, 200, entry.etag, entry.value)
        return True

    async def _send(self, scope: Scope, send: Send, status: int, tag: str, body: bytes) -> None:
        headers = [(b"etag", tag.encode()), (b"cache-control", CACHE_CONTROL_PUBLIC.encode())]
        if status == 200:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await self.reply(scope, send, ROUTES[scope["path"].split("/", 2)[1]], status, headers, body)
