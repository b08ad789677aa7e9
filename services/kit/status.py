"""`/metrics`, `/health` and `/ready` of a consumer service: a small Starlette app served by uvicorn on its own port.

The gateway mounts the same endpoints on its FastAPI app (metrics.install_http); the consumer services (ledger,
scorer, dispatcher, the bot) have no HTTP app of their own, so they run this one beside their broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Check = Callable[[], Awaitable[bool]]
READY_TIMEOUT_S = 3.0


async def metrics_response(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


async def readiness(ready: Check) -> JSONResponse:
    """200 when the dependencies answer within READY_TIMEOUT_S, else 503 (a load balancer stops sending traffic)."""
    try:
        answers = await asyncio.wait_for(ready(), READY_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - a dependency that does not answer is not ready
        answers = False
    if not answers:
        return JSONResponse({"detail": "Backend unavailable"}, status_code=503)
    return JSONResponse({"status": "ready"})


def status_app(ready: Check) -> Starlette:
    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def ready_route(request: Request) -> JSONResponse:
        return await readiness(ready)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        # the gateway's error shape (`{"detail": ...}`), not Starlette's plain-text default
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "Internal Server Error"
        return JSONResponse({"detail": detail}, status_code=status)

    return Starlette(routes=[Route("/metrics", metrics_response), Route("/health", health),
                             Route("/ready", ready_route)],
                     exception_handlers={HTTPException: http_error})


class _Embedded(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to its owner (FastStream, discord.py)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class StatusServer:
    """`/metrics`, `/health` (the process answers) and `/ready` (its dependencies answer) on one port."""

    def __init__(self, port: int, ready: Check, host: str = "0.0.0.0") -> None:
        self.port = port
        self.host = host
        self._app = status_app(ready)
        self._server: _Embedded | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # Bound here, not by uvicorn: a taken port raises OSError to the caller instead of uvicorn's sys.exit.
        listener = socket.create_server((self.host, self.port))
        config = uvicorn.Config(self._app, lifespan="off", access_log=False, log_config=None,
                                timeout_graceful_shutdown=3)
        self._server = _Embedded(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[listener]), name="status-server")
        while not self._server.started:
            if self._task.done():
                listener.close()
                await self._task  # raises what stopped it
                raise RuntimeError("the status server stopped while starting")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.gather(self._task, return_exceptions=True)
        self._server = self._task = None
