"""ASGI middleware of the gateway: URL hygiene and request-body limits (docs/http-api.md "Names", "Limits").

Both run before routing and before any body is parsed, and answer in the one error shape `{"detail": "<string>"}`.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPART_LIMIT = 2_000_000
JSON_LIMIT = 1_000_000
TOO_LARGE = "Request body too large"
NUL_IN_URL = "Invalid request: the URL contains a NUL character"


async def _reply(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return None


def body_limit(scope: Scope) -> int:
    content_type = (_header(scope, b"content-type") or b"").lower()
    return MULTIPART_LIMIT if content_type.startswith(b"multipart/") else JSON_LIMIT


class CollapseLeadingSlashes:
    """`//leaderboards` (a base URL ending in `/`) is `/leaderboards`; a NUL anywhere in the URL is refused.

    Postgres text cannot hold NUL, so a name carrying one could never match anything; refusing it here keeps every
    route from having to know that.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if "\x00" in path or b"%00" in scope.get("query_string", b"").lower():
                await _reply(send, 400, NUL_IN_URL)
                return
            if path.startswith("//"):
                scope = dict(scope, path="/" + path.lstrip("/"))
                raw = scope.get("raw_path")
                if raw:
                    scope["raw_path"] = b"/" + raw.lstrip(b"/")
        await self.app(scope, receive, send)


class LimitRequestBody:
    """Reads the whole body first, bounded by its kind's limit, and replays it to the app: 413 before any parsing.

    A declared Content-Length over the limit is refused without reading; a chunked body is cut off as soon as it
    passes the limit. After the replay the app's receive() goes back to the server (disconnect notices).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (
            _header(scope, b"content-length") is None and _header(scope, b"transfer-encoding") is None
        ):
            await self.app(scope, receive, send)
            return
        limit = body_limit(scope)
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _reply(send, 413, TOO_LARGE)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away before sending everything
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _reply(send, 413, TOO_LARGE)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
