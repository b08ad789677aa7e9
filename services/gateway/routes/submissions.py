"""Submitting and following a submission (http-api.md §3.9, §3.12)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse

from schemas.events import SubmissionReceived
from services.dispatcher import policy
from services.gateway import repository, views
from services.gateway.deps import Broker, CurrentUser, Pool, Settings
from services.kit.bus import publish

router = APIRouter()


def board_view(row) -> policy.LeaderboardView:
    return policy.LeaderboardView(name=row["name"], gpus=tuple(row["gpus"]), deadline=row["deadline"],
                                  lang=row["task"].get("lang", "py"))


@router.post("/submission/{leaderboard}/{gpu}/{mode}", status_code=202)
async def submit(leaderboard: str, gpu: str, mode: str, file: UploadFile, request: Request, user: CurrentUser,
                 pool: Pool, broker: Broker, settings: Settings) -> JSONResponse:
    if user.banned:
        raise HTTPException(403, "You are banned from making submissions.")
    mode = policy.check_mode(mode)
    row = await repository.leaderboard(pool, leaderboard)
    board = policy.check_leaderboard(leaderboard, board_view(row) if row else None)
    policy.check_gpu(board, gpu)
    policy.check_deadline(board, datetime.now(UTC))
    file_name = policy.normalise_file_name(file.filename)
    content = await file.read(policy.MAX_SUBMISSION_BYTES + 1)
    code = policy.check_file(board, file_name, content)

    submission_id = await repository.next_submission_id(pool)
    waiter = request.app.state.waiter
    projected = waiter.expect(submission_id)
    await publish(broker, SubmissionReceived(
        submission_id=submission_id, leaderboard=board.name, gpus=[gpu], mode=mode, user_id=user.user_id,
        user_name=user.user_name, file_name=file_name, code=code, correlation_id=str(submission_id),
    ))
    await waiter.wait(submission_id, projected, settings.projection_wait_s)
    queue = views.runner_queue(gpu, await repository.queue(pool, gpu))
    body = {"status": "accepted", "details": {"id": submission_id, "job_status_id": submission_id},
            "runner_queue": queue}
    return JSONResponse(body, status_code=202)


@router.get("/user/submissions/{submission_id}")
async def show_submission(submission_id: int, user: CurrentUser, pool: Pool) -> dict:
    row = await repository.submission(pool, submission_id)
    if row is None:
        raise HTTPException(404, "Submission not found")
    if str(row["user_id"]) != user.user_id:
        raise HTTPException(403, "Not authorized to view this submission")
    runs = await repository.submission_runs(pool, submission_id)
    gpu = row["gpus"][0] if row["gpus"] else ""
    return views.submission(row, runs, views.runner_queue(gpu, await repository.queue(pool, gpu)))
