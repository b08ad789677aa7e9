"""Admin routes over submissions (docs/http-api.md "Admin routes"): statistics, the full view of one
submission, deletions, submitting on a user's behalf, a leaderboard's submission ids, and the dataset export."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Depends, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse

from schemas.events import SubmissionDeleted
from services.core.admin import precheck_review as precheck
from services.core.opendata import hf_export
from services.core.presentation import views
from services.core.readmodel import admin_reads, operator_reads, submission_reads
from services.gateway.deps import CurrentUser, Pool, idempotency_key, state_of
from services.gateway.policy import boards
from services.gateway.policy.bodies import HuggingFaceExport, JsonBody, documented, read
from services.gateway.policy.changes import bad_request, publish_and_settle
from services.gateway.responses import Accepted, documents
from services.gateway.routes.submissions import accepted_response
from services.gateway.submitting import intake

router = APIRouter()


@router.get("/stats")
async def stats(pool: Pool, last_day_only: bool = False, leaderboard_name: str | None = None) -> dict:
    leaderboard_id = (await boards.existing(pool, leaderboard_name))["id"] if leaderboard_name else None
    since = datetime.now(UTC) - timedelta(days=1) if last_day_only else None
    totals, by_gpu, by_user = await admin_reads.stats(pool, since, leaderboard_id)
    return {"status": "ok", "stats": views.stats(totals, by_gpu, by_user, last_day=last_day_only)}


@router.get("/submissions/{submission_id}")
async def show_submission(submission_id: int, pool: Pool) -> dict:
    """Every run, secret ones included, with their full records."""
    row = await admin_reads.submission(pool, submission_id)
    if row is None:
        raise HTTPException(404, "Submission not found")
    runs = await submission_reads.submission_runs(pool, submission_id)
    verdict = precheck.verdict_view(await operator_reads.precheck_verdict(pool, submission_id))
    holds = precheck.holds_view(await operator_reads.floor_holds(pool, submission_id))
    return {"status": "ok", "submission": views.admin_submission(row, runs) | {"precheck": verdict,
                                                                               "floor_holds": holds}}


async def _delete(request: Request, submission_id: int, user_id: str) -> None:
    deleted = SubmissionDeleted(submission_id=submission_id, user_id=user_id, by_admin=True,
                                correlation_id=str(submission_id))
    await publish_and_settle(request, deleted)


@router.delete("/submissions/{submission_id}")
async def delete_submission(submission_id: int, request: Request, pool: Pool) -> dict:
    row = await admin_reads.submission(pool, submission_id)
    if row is None:
        raise HTTPException(404, "Submission not found")
    await _delete(request, submission_id, str(row["user_id"]))
    return {"status": "ok", "submission_id": submission_id}


@router.delete("/submissions")
async def delete_user_submissions(leaderboard_id: int, user_name: str, request: Request, pool: Pool) -> dict:
    """Every submission of the user(s) of that display name on that leaderboard."""
    board = await admin_reads.leaderboard_by_id(pool, leaderboard_id)
    if board is None:
        raise HTTPException(404, f"Leaderboard `{leaderboard_id}` does not exist.")
    rows = await admin_reads.user_board_submissions(pool, leaderboard_id, user_name.replace("\x00", ""))
    for row in rows:
        await _delete(request, row["id"], str(row["user_id"]))
    return {"status": "ok", "leaderboard_id": leaderboard_id, "user_name": user_name,
            "deleted_job_status": sum(1 for row in rows if row["has_job"]),
            "deleted_runs": sum(row["runs"] for row in rows), "deleted_submissions": len(rows)}


@router.post("/submission/{leaderboard}/{gpu}/{mode}", status_code=202,
             dependencies=[Depends(idempotency_key)], responses=documents(Accepted, 202))
async def submit_for_user(leaderboard: str, gpu: str, mode: str, file: UploadFile, request: Request,
                          user: CurrentUser, pool: Pool) -> JSONResponse:
    """On behalf of the user named by the USER headers, past the leaderboard's deadline too."""
    accepted = await intake.accept(request, user, leaderboard, gpu, mode, file, deadline_applies=False)
    return await accepted_response(pool, accepted)


@router.get("/leaderboards/{leaderboard}/submissions")
async def leaderboard_submissions(leaderboard: str, pool: Pool, limit: int = 100, offset: int = 0) -> dict:
    if not 1 <= limit <= 1000:
        raise bad_request("limit must be between 1 and 1000")
    if offset < 0:
        raise bad_request("offset must be >= 0")
    board = await boards.existing(pool, leaderboard)
    ids = await admin_reads.board_submissions(pool, board["id"], limit, offset)
    return {"status": "ok", "leaderboard": board["name"], "limit": limit, "offset": offset, "submission_ids": ids}


@router.post("/export-hf", openapi_extra=documented(HuggingFaceExport))
async def export_to_hugging_face(request: Request, pool: Pool, body: JsonBody = None) -> dict:
    """The open-data export (services.core.opendata.hf_export) in the public data set's columns, to the private data set
    unless `private` is false; every submission, failed ones included, unless `ranked_only` is true."""
    export = read(HuggingFaceExport, body, {})
    try:
        done = await hf_export.export_to_hub(pool, state_of(request).settings, export.leaderboard_ids,
                                             export.filename, private=export.private is not False,
                                             ranked_only=False if export.ranked_only is None else export.ranked_only)
    except hf_export.ExportRefused as exc:
        raise bad_request(str(exc)) from exc
    except hf_export.ExportNotConfigured as exc:
        raise HTTPException(503, str(exc)) from exc
    except hf_export.ExportFailed as exc:
        raise HTTPException(502, str(exc)) from exc
    return {"status": "ok", "rows": done.rows, "repo_id": done.repo_id, "filename": done.filename}
