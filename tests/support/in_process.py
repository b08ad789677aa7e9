"""The platform in this test process: every service on one event loop in a thread. The test's own clients reach the
gateway through `httpx.ASGITransport`; the gateway also listens on its port (uvicorn on the same loop) for the
programs a test starts (a CLI, schemathesis, a browser) and for the links it writes. Real NATS, real Postgres, the
services' own apps and settings; only the processes are gone.

What it cannot show stays with tests/support/platform.py (subprocesses): a service killed with SIGKILL, several
platforms or replicas in one test, `kernelbot serve`'s own start-up. `kill()` here stops a service the way its
lifespan ends (nothing is left half done that a SIGKILL would leave).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import socket
import threading
from collections.abc import Awaitable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from services.cli.service_settings import settings_class
from tests.support.platform import SERVICES, Platform

CALL_TIMEOUT_S = 120


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """os.environ is `env` alone while the settings are read: as hermetic as a subprocess's environment."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


async def _answer(app: Any, request: httpx.Request, content: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The app's whole answer to `request`, through httpx.ASGITransport, on the loop the app runs on."""
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    sent = httpx.Request(request.method, request.url, headers=request.headers, content=content)
    response = await transport.handle_async_request(sent)
    body = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
    return response.status_code, response.headers.raw, body


class LoopTransport(httpx.BaseTransport):
    """A synchronous client's transport: each request goes to the ASGI app on the platform's loop."""

    def __init__(self, platform: InProcessPlatform) -> None:
        self._platform = platform

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        status, headers, body = self._platform.call(_answer(self._platform.app(), request, request.read()))
        return httpx.Response(status, headers=headers, content=body, request=request)


class AsyncLoopTransport(httpx.AsyncBaseTransport):
    """An asynchronous client's transport, for a test's own event loop: requests run concurrently on the app's."""

    def __init__(self, platform: InProcessPlatform) -> None:
        self._platform = platform

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        work = asyncio.run_coroutine_threadsafe(_answer(self._platform.app(), request, content), self._platform.loop)
        status, headers, body = await asyncio.wrap_future(work)
        return httpx.Response(status, headers=headers, content=body, request=request)


class InProcessPlatform(Platform):
    def __init__(self, nats_url: str, database_url: str, workdir: Path, **options: Any) -> None:
        super().__init__(nats_url, database_url, workdir, **options)
        self.http.close()  # the subprocess platform's client: this one talks to the app itself
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="in-process-platform", daemon=True)
        self._thread.start()
        self._running: dict[str, AsyncExitStack] = {}
        self._app: Any = None
        self.http = httpx.Client(base_url=self.url, transport=LoopTransport(self), timeout=30)

    def call(self, work: Awaitable[Any]) -> Any:
        """Run a coroutine on the platform's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(CALL_TIMEOUT_S)  # type: ignore[arg-type]

    def app(self) -> Any:
        if self._app is None:
            raise RuntimeError("the gateway is not running")
        return self._app

    def start(self, *names: str) -> None:
        for name in names or SERVICES:
            with environment(self.env()):
                settings = settings_class(name)()
            self._running[name] = self.call(self._started(name, settings))

    async def _started(self, name: str, settings: Any) -> AsyncExitStack:
        stack = AsyncExitStack()
        if name == "gateway":
            from services.gateway.app import create_app  # imported once the settings are read, like `serve` does

            app = create_app(settings)
            await stack.enter_async_context(app.router.lifespan_context(app))
            self._app = app
            stack.callback(setattr, self, "_app", None)
            await self._serve_on_port(app, stack)
            return stack
        service = importlib.import_module(f"services.{name}.app").create_app(settings)
        await stack.enter_async_context(service.lifespan_context())
        await service.start()
        stack.push_async_callback(service.stop)
        return stack

    def wait_healthy(self, timeout: float = 60) -> None:
        return None  # the lifespan has run when start() returns

    def log(self, name: str) -> str:
        return f"({name} runs in the test process: its log is the test's captured log)"

    def kill(self, name: str) -> None:
        self.call(self._running.pop(name).aclose())

    def stop(self) -> None:
        """Stop every service, then the loop, even when a service's stop fails: one left running would fill its
        service's handler slot beside the next test's platform in this process. The first failure is raised last."""
        failures: list[BaseException] = []
        for name in reversed(list(self._running)):
            try:
                self.kill(name)
            except Exception as exc:  # noqa: BLE001 - raised below, once the rest are stopped
                failures.append(exc)
        self.stop_children()  # the subprocesses a test started beside the in-process services (Platform.spawn)
        self.http.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if failures:
            raise failures[0]

    def client(self, **options: Any) -> httpx.Client:
        """Another client of the gateway (its own cookies, say)."""
        return httpx.Client(base_url=self.url, transport=LoopTransport(self), timeout=30, **options)

    def async_client(self, **options: Any) -> httpx.AsyncClient:
        """A client for a test's own event loop."""
        return httpx.AsyncClient(base_url=self.url, transport=AsyncLoopTransport(self), timeout=30, **options)

    async def _serve_on_port(self, app: Any, stack: AsyncExitStack) -> None:
        """The gateway on its port too (uvicorn on the platform's loop, stopped with it): the links it writes
        (artifacts, payloads) name that port, and programs other than this test connect there. Listening before
        uvicorn serves: a connection made meanwhile waits in the backlog."""
        import uvicorn  # only once a gateway starts

        listening = socket.create_server(("127.0.0.1", self.port))
        server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
        task = self.loop.create_task(server.serve(sockets=[listening]))
        stack.push_async_callback(lambda: _stopped(server, task))


async def _stopped(server: Any, task: asyncio.Task) -> None:
    server.should_exit = True
    await task

