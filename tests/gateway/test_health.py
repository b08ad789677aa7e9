"""GET /health answers while the gateway runs; GET /ready answers 503 while it cannot reach NATS or Postgres
(docs/http-api.md "Health and readiness")."""

from __future__ import annotations

import uuid

import pytest

from services.kit.embedded import create_database, drop_database
from tests.support.platform import Platform

UNAVAILABLE = (503, {"detail": "Backend unavailable"})
OK = (200, {"status": "ok"})


def probe(platform: Platform, path: str) -> tuple[int, dict]:
    response = platform.http.get(path)
    return response.status_code, response.json()


@pytest.mark.slow
def test_readiness_follows_nats_and_postgres_and_liveness_does_not(nats_server, postgres_server_url, tmp_path):
    name = f"kb_health_{uuid.uuid4().hex[:12]}"
    gateway = Platform(nats_server.url, create_database(postgres_server_url, name), tmp_path)
    gateway.start("gateway")
    try:
        assert probe(gateway, "/ready") == (200, {"status": "ready"}) and probe(gateway, "/health") == OK

        nats_server.stop()
        gateway.wait_for(lambda: probe(gateway, "/ready") == UNAVAILABLE, "503 without NATS", timeout=10)
        assert probe(gateway, "/health") == OK
        nats_server.start()
        gateway.wait_for(lambda: probe(gateway, "/ready")[0] == 200, "200 with NATS back", timeout=15)

        drop_database(postgres_server_url, name)  # ends the gateway's sessions; reconnecting finds no database
        gateway.wait_for(lambda: probe(gateway, "/ready") == UNAVAILABLE, "503 without Postgres", timeout=10)
        assert probe(gateway, "/health") == OK
    finally:
        gateway.stop()
        drop_database(postgres_server_url, name)
