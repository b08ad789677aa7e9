"""A user's own submissions: list, show, delete (docs/http-api.md "A user's submissions")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Request

from schemas.events import SubmissionDeleted
from schemas.policy_events import InviteClaimed
from services.core.presentation import views
from services.core.readmodel import admin_reads, board_reads, queue_reads, submission_reads
from services.gateway import long_poll
from services.gateway.changes import bad_request, field, publish_and_settle
from services.gateway.deps import CliUser, CurrentUser, Pool, Settings

router = APIRouter(prefix="/user")


@router.get("/submissions")
async def list_submissions(user: CurrentUser, pool: Pool, leaderboard: str | None = None, limit: int = 50,
                           offset: int = 0) -> list[dict]:
    """Newest first; `runs` holds only ranked results. An unknown leaderboard lists nothing."""
    if not 1 <= limit <= 100:
        raise HTTPException(400, "limit must be between 1 and 100")
    if offset < 0:
        raise HTTPException(400, "offset must be >= 0")
    leaderboard_id = None
    if leaderboard:
        board = await board_reads.leaderboard(pool, leaderboard)
        if board is None:
            return []
        leaderboard_id = board["id"]
    rows = await submission_reads.user_submissions(pool, user.user_id, leaderboard_id, limit, offset)
    return [views.user_submission(row) for row in rows]


async def _owned(pool, submission_id: int, user_id: str, verb: str):
    row = await submission_reads.submission(pool, submission_id)
    if row is None:
        raise HTTPException(404, "Submission not found")
    if str(row["user_id"]) != user_id:
        raise HTTPException(403, f"Not authorized to {verb} this submission")
    return row


async def _view(pool, submission_id: int, user_id: str) -> dict:
    row = await _owned(pool, submission_id, user_id, "view")
    runs = await submission_reads.submission_runs(pool, submission_id)
    gpu = row["gpus"][0] if row["gpus"] else ""
    return views.submission(row, runs, views.runner_queue(gpu, await queue_reads.queue(pool, gpu, submission_id)))


@router.get("/submissions/{submission_id}", description=long_poll.__doc__)
async def show_submission(submission_id: int, request: Request, user: CurrentUser, pool: Pool,
                          settings: Settings) -> dict:
    """One submission with its runs. A poll of popcorn-cli's submit loop is held until the submission is done
    (at most `long_poll_s`); any other read is answered at once (docs/polling.md)."""
    view = await _view(pool, submission_id, user.user_id)
    state = request.app.state
    if long_poll.holds(state, settings, user.user_id, submission_id, view, datetime.now(UTC)):
        view = await long_poll.hold_until_done(lambda: _view(pool, submission_id, user.user_id),
                                               lambda: state.waiter.changed(submission_id), settings.long_poll_s)
    state.poll_memory.answered(user.user_id, submission_id, datetime.now(UTC), view["done"])
    return view


@router.delete("/submissions/{submission_id}")
async def delete_submission(submission_id: int, request: Request, user: CurrentUser, pool: Pool) -> dict:
    """Hides the submission and its runs everywhere once the ledger has recorded the deletion.

    Cancelling a job that is still pending or running is the dispatcher's part of the same event.
    """
    await _owned(pool, submission_id, user.user_id, "delete")
    deleted = SubmissionDeleted(submission_id=submission_id, user_id=user.user_id,
                                correlation_id=str(submission_id))
    await publish_and_settle(request, deleted)
    return {"status": "ok", "submission_id": submission_id}


@router.post("/join")
async def join(user: CliUser, request: Request, pool: Pool, body: Annotated[Any, Body()] = None) -> dict:
    """Claim an invite code: its leaderboards open to the caller. Claiming one's own code again changes nothing."""
    code = field(body, "code")
    if not isinstance(code, str):
        raise bad_request("Missing required field: code")
    found = await admin_reads.invite(pool, code) if code and "\x00" not in code else None
    if found is None:
        raise bad_request("Invalid invite code")
    if found["user_id"] is None:
        # Two users racing for one code publish the same message id: the stream keeps the first, and so does the
        # projection, whenever a duplicate arrives.
        claim = InviteClaimed(code=code, user_id=user.user_id, user_name=user.user_name)
        await publish_and_settle(request, claim)
        found = await admin_reads.invite(pool, code)
        if found is None:
            raise bad_request("Invalid invite code")
    if found["user_id"] != user.user_id:
        raise bad_request("This invite code has already been claimed")
    return {"status": "ok", "leaderboards": await admin_reads.board_names(pool, list(found["leaderboard_ids"]))}
