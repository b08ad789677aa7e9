"""Every error body is {"detail": "<string>"} (docs/http-api.md "Errors"), whatever raised it."""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.core.admission.policy import Refused
from services.kit.bus import PublishFailed
from services.kit.outage import is_outage, outage_types

log = logging.getLogger("kernelbot.gateway")
UNAVAILABLE = "Backend unavailable"
RETRY_AFTER_S = "5"


def unavailable_response() -> JSONResponse:
    return JSONResponse({"detail": UNAVAILABLE}, status_code=503, headers={"Retry-After": RETRY_AFTER_S})


def _detail_text(exc: RequestValidationError) -> str:
    first = exc.errors()[0] if exc.errors() else {}
    location = ".".join(str(part) for part in first.get("loc", ()))
    if location == "body.file":
        return "Missing multipart field 'file'"
    return f"Invalid request: {location}: {first.get('msg', 'malformed')}"


def install(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Refused)
    async def refused(_: Request, exc: Refused) -> JSONResponse:
        retry = exc.refusal.retry_after_s
        headers = {"Retry-After": str(retry)} if retry is not None else None
        return JSONResponse({"detail": exc.refusal.detail}, status_code=exc.refusal.status, headers=headers)

    @app.exception_handler(PublishFailed)
    async def unavailable(_: Request, exc: PublishFailed) -> JSONResponse:
        log.error("event store unavailable: %s", exc)
        return unavailable_response()

    # Postgres or NATS away is no bug of ours and no fault of the client: 503, and the client may come back.
    async def outage(_: Request, exc: Exception) -> JSONResponse:
        log.warning("backend unavailable: %r", exc)
        return unavailable_response()

    for kind in outage_types():
        app.add_exception_handler(kind, outage)

    @app.exception_handler(RequestValidationError)
    async def malformed(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _detail_text(exc)}, status_code=422)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        if is_outage(exc):  # wrapped in an exception group by a task group on its way up
            return await outage(request, exc)
        ref = uuid.uuid4().hex[:12]
        log.error("unhandled error (ref %s)", ref, exc_info=exc)
        return JSONResponse({"detail": f"Internal server error (ref {ref})"}, status_code=500)
