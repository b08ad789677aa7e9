"""Background submit (docs/http-api.md "Submitting"): validate, record, answer 202 at once; the client polls
(docs/polling.md)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request, UploadFile
from fastapi.responses import JSONResponse

from services.core.presentation import views
from services.core.readmodel import queue_reads
from services.gateway.deps import Pool, SubmittingUser, idempotency_key
from services.gateway.responses import Accepted, documents
from services.gateway.submitting import intake

router = APIRouter()
log = logging.getLogger("kernelbot.gateway")


async def accepted_response(pool, accepted: intake.Accepted) -> JSONResponse:
    """The 202 of both background submit routes, with the submission's place in its GPU's queue.

    The submission is recorded by now: a queue that cannot be read (Postgres away) must not turn the 202 into an
    error that makes the client submit again.
    """
    try:
        queue = views.runner_queue(accepted.gpu, await queue_reads.queue(pool, accepted.gpu, accepted.submission_id))
    except Exception:  # noqa: BLE001
        log.warning("queue of submission %s unreadable", accepted.submission_id, exc_info=True)
        queue = dict(views.runner_queue(accepted.gpu, None), error="the queue could not be read just now")
    body = {"status": "accepted", "details": {"id": accepted.submission_id, "job_status_id": accepted.submission_id},
            "runner_queue": queue}
    return JSONResponse(body, status_code=202)


@router.post("/submission/{leaderboard}/{gpu}/{mode}", status_code=202,
             dependencies=[Depends(idempotency_key)], responses=documents(Accepted, 202))
async def submit(leaderboard: str, gpu: str, mode: str, file: UploadFile, request: Request, user: SubmittingUser,
                 pool: Pool) -> JSONResponse:
    return await accepted_response(pool, await intake.accept(request, user, leaderboard, gpu, mode, file))
