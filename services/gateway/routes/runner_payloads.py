"""`GET /runner/payloads/{token}`: a run payload too large for its backend's carrier, for the runner that was handed
the link (services/kit/payload_links.py). Served once, then gone; not part of the client API (no OpenAPI entry)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from services.gateway.deps import Pool
from services.gateway.submitting import payloads_repository
from services.kit.payload_links import PATH, token_hash

router = APIRouter()
GONE = "Unknown, already fetched or expired payload link: the run's next attempt gets a new one."


@router.get(PATH + "/{token}", include_in_schema=False)
async def runner_payload(token: str, pool: Pool) -> Response:
    body = await payloads_repository.take_payload(pool, token_hash(token))
    if body is None:
        return JSONResponse({"detail": GONE}, status_code=404, headers={"Cache-Control": "no-store"})
    # The payload may carry a secret seed: nothing between here and the runner may keep a copy.
    return PlainTextResponse(body, headers={"Cache-Control": "no-store"})
