"""The web page of a public board, for someone not signed in: answered in front of the application (base.py).

Near a deadline people keep refreshing a board's page, and most of them are not signed in. Their page is the same for
all of them: the route's page for no viewer, whose form token nothing on it uses. So this fast path answers a GET of
`/web/leaderboards/{name}`, with no parameter but `gpu`, from a browser that holds no session cookie, on a public
board and one of its GPUs, with the very values the route renders (web/board_page.py). Everything else (a session
cookie, valid or not, a closed or unknown board, an unknown GPU, any other parameter, any error) goes on to the route
in services/gateway/routes/pages.py, which decides who sees what and answers it as it always did.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.types import Scope, Send

from services.core.readmodel import board_reads
from services.gateway.fastpaths.base import FastPath, header
from services.gateway.fastpaths.coalesce import Coalesced
from services.gateway.web import HEADERS as PAGE_HEADERS
from services.gateway.web import board_page, render
from services.gateway.web.session import COOKIE

if TYPE_CHECKING:  # the state holds the caches: a runtime import would go round in a circle
    from services.gateway.state import GatewayState

ROUTE = "/web/leaderboards/{name}"
PATH = re.compile(r"^/web/leaderboards/([^/]+)$")
HEADERS = [(b"content-type", b"text/html; charset=utf-8"),
           *((name.lower().encode(), value.encode()) for name, value in PAGE_HEADERS.items())]


def wanted_gpu(query_string: bytes) -> tuple[bool, str | None]:
    """Whether the fast path may answer these parameters, and the GPU asked for (None: the board's first)."""
    try:
        pairs = parse_qsl(query_string.decode("ascii"), keep_blank_values=True)
    except UnicodeDecodeError:
        return False, None
    if not pairs:
        return True, None
    if len(pairs) != 1 or pairs[0][0] != "gpu" or not pairs[0][1]:
        return False, None
    return True, pairs[0][1]


def signed_in(scope: Scope) -> bool:
    """Whether the browser sends a session cookie at all: the route then decides who it is."""
    cookies = header(scope, b"cookie")
    return cookies is not None and f"{COOKIE}=".encode() in cookies


class BoardPageFastPath(FastPath):
    def __init__(self, state: GatewayState) -> None:
        super().__init__(state)
        self._boards = Coalesced(lambda name, gpu: board_reads.board_page(state.pool, name, gpu))

    async def answered(self, scope: Scope, send: Send) -> bool:
        match = PATH.match(scope["path"])
        if match is None or signed_in(scope):
            return False
        plain, gpu = wanted_gpu(scope["query_string"])
        if not plain:
            return False
        state = self.state
        board = await self._boards.get(match.group(1), gpu)  # the path as ASGI gives it: decoded once already
        if board is None or board["visibility"] != "public" or not board["gpus"]:
            return False
        gpu, version = await board_page.shown_gpu(state.pool, board, gpu)
        if gpu not in board["gpus"]:
            return False
        values = await board_page.context(state.pool, state.standings_cache, board, gpu, version)
        body = render("leaderboard.html", csrf_token="", viewer=None, **values).encode()
        await self.reply(scope, send, ROUTE, 200, [*HEADERS, (b"content-length", str(len(body)).encode())], body)
        return True
