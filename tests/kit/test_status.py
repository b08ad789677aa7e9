"""The consumer services' status server (services/kit/status.py): real uvicorn on a real port, read over HTTP."""

from __future__ import annotations

import asyncio
import signal
import socket

import httpx
import pytest
from prometheus_client import CONTENT_TYPE_LATEST

from services.kit import metrics, status
from services.kit.embedded.common import free_port


class Dependencies:
    def __init__(self) -> None:
        self.answer: bool | Exception = True
        self.delay_s = 0.0

    async def __call__(self) -> bool:
        await asyncio.sleep(self.delay_s)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
async def served():
    dependencies = Dependencies()
    server = status.StatusServer(free_port(), dependencies, host="127.0.0.1")
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as http:
            yield server, dependencies, http
    finally:
        await server.stop()


async def test_health_metrics_and_unknown_paths(served):
    _, _, http = served
    metrics.EVENTS_EMITTED.labels("StatusServerProbe").inc()

    health = await http.get("/health?verbose=1")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    scraped = await http.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"] == CONTENT_TYPE_LATEST
    assert 'kb_events_emitted_total{type="StatusServerProbe"}' in scraped.text
    missing = await http.get("/nothing")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})


async def test_ready_follows_the_dependencies(served, monkeypatch):
    _, dependencies, http = served
    monkeypatch.setattr(status, "READY_TIMEOUT_S", 0.2)
    unavailable = (503, {"detail": "Backend unavailable"})

    async def ready() -> tuple[int, dict]:
        response = await http.get("/ready")
        return response.status_code, response.json()

    assert await ready() == (200, {"status": "ready"})
    dependencies.answer = False
    assert await ready() == unavailable
    dependencies.answer = ConnectionRefusedError("postgres is away")
    assert await ready() == unavailable
    dependencies.answer, dependencies.delay_s = True, 1.0  # answers, but too late
    assert await ready() == unavailable
    dependencies.delay_s = 0.0
    assert await ready() == (200, {"status": "ready"})


async def test_stopping_frees_the_port_and_leaves_signals_to_the_owner():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    server = status.StatusServer(free_port(), Dependencies(), host="127.0.0.1")
    await server.start()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.get(f"http://127.0.0.1:{server.port}/health")).status_code == 200
        await server.stop()
        with pytest.raises(httpx.TransportError):
            await http.get(f"http://127.0.0.1:{server.port}/health")
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    with socket.create_server(("127.0.0.1", server.port)):  # free again
        pass


async def test_a_taken_port_is_an_error_for_the_caller():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        server = status.StatusServer(taken.getsockname()[1], Dependencies(), host="127.0.0.1")
        with pytest.raises(OSError):
            await server.start()
    await server.stop()  # nothing started: a no-op
