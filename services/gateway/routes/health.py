"""Liveness of the gateway and of what it depends on."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.gateway.deps import Broker, Pool

router = APIRouter()


@router.get("/health")
async def health(pool: Pool, broker: Broker) -> JSONResponse:
    try:
        await pool.fetchval("SELECT 1")
        healthy = broker.connection is not None and broker.connection.is_connected
    except Exception:  # noqa: BLE001 - any failure means the backend is unavailable
        healthy = False
    if not healthy:
        return JSONResponse({"detail": "Backend unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
