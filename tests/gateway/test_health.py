"""GET /health answers 503 while the gateway cannot reach NATS or Postgres (http-api.md §3.1)."""

from __future__ import annotations

import uuid

from services.kit.embedded import create_database, drop_database
from tests.support.platform import Platform

UNAVAILABLE = (503, {"detail": "Backend unavailable"})


def health(platform: Platform) -> tuple[int, dict]:
    response = platform.http.get("/health")
    return response.status_code, response.json()


def test_health_follows_nats_and_postgres(nats_server, postgres_server_url, tmp_path):
    name = f"kb_health_{uuid.uuid4().hex[:12]}"
    gateway = Platform(nats_server.url, create_database(postgres_server_url, name), tmp_path)
    gateway.start("gateway")
    try:
        assert health(gateway) == (200, {"status": "ok"})

        nats_server.stop()
        gateway.wait_for(lambda: health(gateway) == UNAVAILABLE, "503 without NATS", timeout=10)
        nats_server.start()
        gateway.wait_for(lambda: health(gateway)[0] == 200, "200 with NATS back", timeout=15)

        drop_database(postgres_server_url, name)  # ends the gateway's sessions; reconnecting finds no database
        gateway.wait_for(lambda: health(gateway) == UNAVAILABLE, "503 without Postgres", timeout=10)
    finally:
        gateway.stop()
        drop_database(postgres_server_url, name)
