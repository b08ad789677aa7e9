"""A user's own submissions: list, show, delete (docs/http-api.md "A user's submissions")."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from schemas.events import SubmissionDeleted
from schemas.policy_events import InviteClaimed
from services.core.presentation import views
from services.core.readmodel import admin_reads, board_reads, submission_reads
from services.gateway.deps import CliUser, CurrentUser, Pool
from services.gateway.policy.bodies import JOIN_REFUSALS, InviteClaim, JsonBody, documented, read
from services.gateway.policy.changes import bad_request, publish_and_settle
from services.gateway.policy.ownership import owned
from services.gateway.responses import Deleted, Joined, UserSubmission, documents

router = APIRouter(prefix="/user")


@router.get("/submissions", responses=documents(list[UserSubmission]))
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


@router.delete("/submissions/{submission_id}", responses=documents(Deleted))
async def delete_submission(submission_id: int, request: Request, user: CurrentUser, pool: Pool) -> dict:
    """Hides the submission and its runs everywhere once the ledger has recorded the deletion.

    Cancelling a job that is still pending or running is the dispatcher's part of the same event.
    """
    await owned(pool, submission_id, user.user_id, "delete")
    deleted = SubmissionDeleted(submission_id=submission_id, user_id=user.user_id,
                                correlation_id=str(submission_id))
    await publish_and_settle(request, deleted)
    return {"status": "ok", "submission_id": submission_id}


@router.post("/join", openapi_extra=documented(InviteClaim), responses=documents(Joined))
async def join(user: CliUser, request: Request, pool: Pool, body: JsonBody = None) -> dict:
    """Claim an invite code: its leaderboards open to the caller. Claiming one's own code again changes nothing."""
    code = read(InviteClaim, body, JOIN_REFUSALS).code
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
