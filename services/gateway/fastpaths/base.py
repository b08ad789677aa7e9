"""The base of every fast path: an ASGI middleware that answers some GETs before routing, from the gateway's state.

A fast path answers only the plain case it knows byte for byte as its route would; everything else (and every
request while the lifespan has not started) goes on to the routes, which answer it as they always did.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:  # the state holds the fast paths' caches: a runtime import would go round in a circle
    from services.gateway.state import GatewayState


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first header of that (lower-case) name, as the routes read it."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


class FastPath:
    def __init__(self, app: ASGIApp, state: GatewayState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and self.state.started \
                and await self.answered(scope, send):
            return
        await self.app(scope, receive, send)

    async def answered(self, scope: Scope, send: Send) -> bool:
        """Answer the request and return True, or return False (having sent nothing) to leave it to the routes."""
        raise NotImplementedError

    @staticmethod
    async def reply(scope: Scope, send: Send, route: str, status: int, headers: list[tuple[bytes, bytes]],
                    body: bytes = b"") -> None:
        """Send the answer, labelled for the request metrics with the template of the route it stands for."""
        scope["route"] = SimpleNamespace(path=route)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
