"""Admin policy routes (docs/http-api.md "Admin routes"): kill switch, visibility, rate limits,
invites and bans. Each change is an event (schemas.policy_events); the answer comes once the read model shows it."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, HTTPException, Request

from schemas.policy_events import (
    InviteRevoked,
    InvitesCreated,
    LeaderboardVisibilityChanged,
    RateLimitCleared,
    RateLimitSet,
)
from services.core.admin import policy_changes
from services.core.admission import policy
from services.core.presentation import views
from services.core.readmodel import admin_reads
from services.gateway.deps import Pool, State
from services.gateway.policy import boards
from services.gateway.policy.bodies import (
    INVITES_REFUSALS,
    NO_BOARDS,
    RATE_LIMIT_REFUSALS,
    VISIBILITY_REFUSALS,
    JsonBody,
    NewInvites,
    RateLimitChange,
    VisibilityChange,
    documented,
    read,
)
from services.gateway.policy.changes import bad_request, change_id, publish_and_settle
from services.gateway.state import GatewayState

router = APIRouter()
BAD_CATEGORY = "mode_category must be 'test' or 'leaderboard'"


# --- kill switch --------------------------------------------------------------------------------------------


async def _intake(state: GatewayState, accepting: bool) -> dict:
    await policy_changes.set_intake(state.broker, state.position, accepting, state.settings.projection_wait_s)
    return {"status": "ok", "accepts_jobs": accepting}


@router.post("/start")
async def start_intake(state: State, pool: Pool) -> dict:
    """Re-open submission intake (durable)."""
    return await _intake(state, True)


@router.post("/stop")
async def stop_intake(state: State, pool: Pool) -> dict:
    """Close submission intake; accepted jobs continue."""
    return await _intake(state, False)


# --- bans ---------------------------------------------------------------------------------------------------


async def _ban(state: GatewayState, pool, user_id: str, banned: bool) -> dict:
    try:
        await policy_changes.set_ban(state.broker, pool, state.position, user_id, banned,
                                      state.settings.projection_wait_s)
    except policy_changes.UnknownUser as unknown:
        raise HTTPException(404, str(unknown)) from unknown
    return {"status": "ok", "user_id": user_id, "banned": banned}


@router.post("/ban/{user_id}")
async def ban_user(user_id: str, state: State, pool: Pool) -> dict:
    return await _ban(state, pool, user_id, True)


@router.delete("/ban/{user_id}")
async def unban_user(user_id: str, state: State, pool: Pool) -> dict:
    return await _ban(state, pool, user_id, False)


# --- visibility ---------------------------------------------------------------------------------------------


@router.post("/leaderboards/{leaderboard}/visibility", openapi_extra=documented(VisibilityChange))
async def set_visibility(leaderboard: str, request: Request, pool: Pool, body: JsonBody = None) -> dict:
    board = await boards.existing(pool, leaderboard)
    visibility = read(VisibilityChange, body, VISIBILITY_REFUSALS).visibility

    event = LeaderboardVisibilityChanged(leaderboard=board["name"], visibility=visibility, change_id=change_id())
    await publish_and_settle(request, event)
    return {"status": "ok", "leaderboard": board["name"], "visibility": visibility}


# --- rate limits --------------------------------------------------------------------------------------------


async def _limits(pool, board) -> dict[str, dict]:
    return {row["mode_category"]: views.rate_limit(row) for row in await admin_reads.rate_limits(pool, board["id"])}


@router.put("/leaderboards/{leaderboard}/rate-limits", openapi_extra=documented(RateLimitChange))
async def set_rate_limit(leaderboard: str, request: Request, pool: Pool, body: JsonBody = None) -> dict:
    board = await boards.existing(pool, leaderboard)
    change = read(RateLimitChange, body, RATE_LIMIT_REFUSALS)
    category, most = change.mode_category, change.max_submissions_per_hour

    event = RateLimitSet(leaderboard=board["name"], mode_category=category, max_submissions_per_hour=most,
                         change_id=change_id())
    await publish_and_settle(request, event)
    return {"status": "ok", "rate_limit": (await _limits(pool, board)).get(category)}


@router.get("/leaderboards/{leaderboard}/rate-limits")
async def list_rate_limits(leaderboard: str, pool: Pool) -> dict:
    board = await boards.existing(pool, leaderboard)
    return {"status": "ok", "leaderboard": board["name"], "rate_limits": list((await _limits(pool, board)).values())}


@router.delete("/leaderboards/{leaderboard}/rate-limits/{mode_category}")
async def clear_rate_limit(leaderboard: str, mode_category: str, request: Request, pool: Pool) -> dict:
    if mode_category not in policy.RATE_CATEGORIES:
        raise bad_request(BAD_CATEGORY)
    board = await boards.existing(pool, leaderboard)
    if mode_category not in await _limits(pool, board):
        raise HTTPException(404, f"No rate limit found for '{board['name']}' with category '{mode_category}'")

    event = RateLimitCleared(leaderboard=board["name"], mode_category=mode_category, change_id=change_id())
    await publish_and_settle(request, event)
    return {"status": "ok", "leaderboard": board["name"], "mode_category": mode_category}


# --- invites ------------------------------------------------------------------------------------------------


@router.post("/invites", openapi_extra=documented(NewInvites))
async def create_invites(request: Request, pool: Pool, body: JsonBody = None) -> dict:
    """`count` codes (URL-safe, 128 random bits), each unlocking every listed leaderboard."""
    invites = read(NewInvites, body, INVITES_REFUSALS)
    count, names = invites.count, invites.names()
    if names is None:
        raise bad_request(NO_BOARDS)
    stored = list(dict.fromkeys([(await boards.existing(pool, name))["name"] for name in names]))
    codes = [secrets.token_urlsafe(16) for _ in range(count)]

    await publish_and_settle(request, InvitesCreated(leaderboards=stored, codes=codes))
    return {"status": "ok", "leaderboards": stored, "codes": codes}


@router.get("/leaderboards/{leaderboard}/invites")
async def list_invites(leaderboard: str, pool: Pool) -> dict:
    board = await boards.existing(pool, leaderboard)
    invites = [views.invite(row) for row in await admin_reads.board_invites(pool, board["id"])]
    return {"status": "ok", "leaderboard": board["name"], "invites": invites}


@router.delete("/invites/{code}")
async def revoke_invite(code: str, request: Request, pool: Pool) -> dict:
    found = await admin_reads.invite(pool, code)
    if found is None:
        raise HTTPException(404, "Invalid invite code")

    await publish_and_settle(request, InviteRevoked(code=code))
    return {"status": "ok", "code": code, "was_claimed": found["user_id"] is not None}
