"""Background submit (http-api.md §3.9): validate, record, answer 202 at once; the client polls §3.12."""

from __future__ import annotations

from fastapi import APIRouter, Request, UploadFile
from fastapi.responses import JSONResponse

from services.gateway import intake, repository, views
from services.gateway.deps import CurrentUser, Pool

router = APIRouter()


@router.post("/submission/{leaderboard}/{gpu}/{mode}", status_code=202)
async def submit(leaderboard: str, gpu: str, mode: str, file: UploadFile, request: Request, user: CurrentUser,
                 pool: Pool) -> JSONResponse:
    accepted = await intake.accept(request, user, leaderboard, gpu, mode, file)
    queue = views.runner_queue(gpu, await repository.queue(pool, gpu))
    body = {"status": "accepted", "details": {"id": accepted.submission_id, "job_status_id": accepted.submission_id},
            "runner_queue": queue}
    return JSONResponse(body, status_code=202)
