"""Liveness of the gateway and of what it depends on (http-api.md §3.1)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.core import read_model as repository
from services.gateway.deps import Broker, Pool

router = APIRouter()
PING_TIMEOUT_S = 2.0


@router.get("/health")
async def health(pool: Pool, broker: Broker) -> JSONResponse:
    """200 `{"status": "ok"}` while Postgres answers and NATS is connected; 503 otherwise."""
    try:
        await asyncio.wait_for(repository.ping(pool, PING_TIMEOUT_S), PING_TIMEOUT_S + 0.5)
        healthy = broker.connection is not None and broker.connection.is_connected
    except Exception:  # noqa: BLE001 - any failure means the backend is unavailable
        healthy = False
    if not healthy:
        return JSONResponse({"detail": "Backend unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
