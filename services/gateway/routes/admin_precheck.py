"""Admin routes of the source pre-check (docs/operations.md): a competition's outcomes per rule, a submission's
verdict with the rules that fired, and clearing a false positive (rescored through the rejudge path)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request

from services.core.admin import precheck_review as precheck
from services.core.readmodel import operator_reads
from services.gateway.deps import Pool
from services.gateway.policy.bodies import (
    CLEARING_REFUSALS,
    JsonBody,
    PrecheckPolicyChange,
    VerdictClearing,
    documented,
    read,
)
from services.gateway.policy.changes import publish_and_settle

router = APIRouter()
CLEARED_BY = "admin"


def _http(error: precheck.PrecheckError) -> HTTPException:
    return HTTPException(error.status, str(error))


@router.get("/leaderboards/{leaderboard}/precheck")
async def show_policy(leaderboard: str, pool: Pool) -> dict:
    if await operator_reads.board(pool, leaderboard) is None:
        raise HTTPException(404, f"Leaderboard `{leaderboard}` does not exist.")
    return {"status": "ok", "rules": precheck.policy_view(await operator_reads.precheck_policy(pool, leaderboard))}


@router.put("/leaderboards/{leaderboard}/precheck", openapi_extra=documented(PrecheckPolicyChange))
async def set_policy(leaderboard: str, request: Request, pool: Pool, body: JsonBody = None) -> dict:
    """Body `{"outcomes": {"<rule>": "refuse" | "hacked" | "warn" | "off"}}`; rules not named keep their default."""
    try:
        event = await precheck.build_policy(pool, leaderboard, read(PrecheckPolicyChange, body, {}).outcomes)
    except precheck.PrecheckError as error:
        raise _http(error) from error

    await publish_and_settle(request, event)
    return {"status": "ok", "rules": precheck.policy_view(await operator_reads.precheck_policy(pool, leaderboard))}


@router.get("/submissions/{submission_id}/precheck")
async def show_verdict(submission_id: int, pool: Pool) -> dict:
    view = precheck.verdict_view(await operator_reads.precheck_verdict(pool, submission_id))
    if view is None:
        raise HTTPException(404, f"Submission {submission_id} has no pre-check verdict")
    return {"status": "ok", "submission_id": submission_id, "precheck": view}


@router.post("/submissions/{submission_id}/precheck/clear", openapi_extra=documented(VerdictClearing))
async def clear_verdict(submission_id: int, request: Request, pool: Pool, body: JsonBody = None) -> dict:
    """Clear a `hacked` verdict, or a score the floor held for review, judged a false positive; the scorer then
    reinstates the submission (its job status leaves `hacked`) and rescores its board. Answers once the clearing
    shows."""
    reason = read(VerdictClearing, body, CLEARING_REFUSALS).reason
    try:
        event = await precheck.build_clear(pool, submission_id, CLEARED_BY, reason or "")
    except precheck.PrecheckError as error:
        raise _http(error) from error

    await publish_and_settle(request, event)
    return {"status": "ok", "submission_id": submission_id,
            "submission_status": await operator_reads.submission_status(pool, submission_id),
            "precheck": precheck.verdict_view(await operator_reads.precheck_verdict(pool, submission_id)),
            "floor_holds": precheck.holds_view(await operator_reads.floor_holds(pool, submission_id))}
