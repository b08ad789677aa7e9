"""Liveness of the gateway (docs/http-api.md "Health and readiness"); readiness is `/ready` (services/kit/metrics.py).

Liveness never asks Postgres or NATS: a probe that did would restart every replica whenever the database blinks,
and a restart fixes nothing the process's own reconnecting would not. `/ready` takes a replica out of the load
balancer meanwhile.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

router = APIRouter()


@router.get("/health")
async def health() -> JSONResponse:
    """200 `{"status": "ok"}` while the process serves requests, whether or not Postgres and NATS answer."""
    return JSONResponse({"status": "ok"})
