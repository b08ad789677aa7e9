"""The base of every fast path, and the front that tries them before the application's own middleware.

A fast path answers only the plain case it knows byte for byte as its route would; everything else (and every
request while the lifespan has not started) goes on to the routes, which answer it as they always did.

The fast paths run in front of the whole application (`FastPathFront`, called by the gateway's FastAPI subclass),
not as one more middleware inside it: near a deadline the answer itself costs less than the seven middleware layers
FastAPI and Starlette put around every request (measured with py-spy at c=64: about a third of the gateway's CPU
per cached ranking). So what those layers did for a fast path is done here: the URL hygiene the gateway's own
middleware applies (a NUL or a doubled leading slash is never a fast path's; the routes answer them), and the request
metric by route template.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from starlette.types import Scope, Send

from services.kit.metrics import HTTP_SECONDS

if TYPE_CHECKING:  # the state holds the fast paths' caches: a runtime import would go round in a circle
    from services.gateway.state import GatewayState

log = logging.getLogger("kernelbot.gateway.fastpaths")


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first header of that (lower-case) name, as the routes read it."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


class FastPath:
    def __init__(self, state: GatewayState) -> None:
        self.state = state

    async def answered(self, scope: Scope, send: Send) -> bool:
        """Answer the request and return True, or return False (having sent nothing) to leave it to the routes."""
        raise NotImplementedError

    @staticmethod
    async def reply(scope: Scope, send: Send, route: str, status: int, headers: list[tuple[bytes, bytes]],
                    body: bytes = b"") -> None:
        """Send the answer, labelled for the request metrics with the template of the route it stands for."""
        scope["kb.answered"] = (route, status)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class FastPathFront:
    """Tries each fast path in turn on a plain GET; True when one of them answered."""

    def __init__(self, state: GatewayState, paths: Sequence[FastPath]) -> None:
        self.state = state
        self.paths = tuple(paths)

    async def answered(self, scope: Scope, send: Send) -> bool:
        if scope["type"] != "http" or scope["method"] != "GET" or not self.state.started:
            return False
        path: str = scope["path"]
        if path.startswith("//") or "\x00" in path or b"%00" in scope.get("query_string", b"").lower():
            return False  # the gateway's middleware cleans or refuses it (edge/middleware.py)
        started = time.perf_counter()
        for fast in self.paths:
            try:
                if not await fast.answered(scope, send):
                    continue
            except Exception:  # noqa: BLE001 - nothing was sent: the route meets the same trouble and answers it
                if "kb.answered" in scope:
                    raise
                log.debug("a fast path fell back to the routes", exc_info=True)
                return False
            route, status = scope["kb.answered"]
            HTTP_SECONDS.labels("GET", route, str(status)).observe(time.perf_counter() - started)
            return True
        return False
