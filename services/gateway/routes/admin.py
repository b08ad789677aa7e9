"""Admin routes (docs/http-api.md "Admin routes") under one ADMIN guard: provisioning CLI identities here, policy
changes and submission tools in their own modules."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel

from schemas.auth_events import WebAuthIdSet
from schemas.credentials import cli_id_hash
from schemas.events import CliUserRegistered
from services.core.readmodel import user_reads
from services.gateway.deps import Broker, Pool, require_admin
from services.gateway.routes import admin_policy, admin_precheck, admin_submissions
from services.kit.bus import publish

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])
router.include_router(admin_policy.router)
router.include_router(admin_submissions.router)
router.include_router(admin_precheck.router)


class NewUser(BaseModel):
    # Optional in the schema so that a missing field is the documented 400 (docs/http-api.md "Admin routes"), not a 422.
    user_id: str = ""
    user_name: str = ""
    cli_id: str | None = None
    web_auth_id: str | None = None


@router.post("/users")
async def register_user(body: NewUser, pool: Pool, broker: Broker) -> dict:
    if not body.user_id or not body.user_name:
        raise HTTPException(400, "user_id and user_name are required")
    if any("\x00" in (value or "") for value in (body.user_id, body.user_name, body.cli_id, body.web_auth_id)):
        raise HTTPException(400, "Invalid request: a field contains a NUL character")
    cli_id = body.cli_id or secrets.token_urlsafe(24)
    owner = await user_reads.cli_owner(pool, cli_id)
    if owner is not None and owner != body.user_id:
        raise HTTPException(400, "cli_id already in use")
    web_digest = cli_id_hash(body.web_auth_id) if body.web_auth_id else None
    await publish(broker, CliUserRegistered(user_id=body.user_id, user_name=body.user_name,
                                            cli_id_sha256=cli_id_hash(cli_id), web_auth_id_sha256=web_digest))
    return {"status": "ok", "user_id": body.user_id, "user_name": body.user_name, "cli_id": cli_id}


class WebId(BaseModel):
    user_name: str = ""
    web_auth_id: str | None = None  # default: a fresh random id


# A web id is a bearer credential like a CLI id: one an operator or website chooses must not be guessable.
MIN_WEB_ID_CHARS = 16


@router.put("/users/{user_id}/web-auth-id")
async def set_web_auth_id(user_id: str, body: WebId, pool: Pool, broker: Broker) -> dict:
    """Give a user the web id (`X-Web-Auth-Id`) a website submits with on their behalf, as kernelboard does when
    someone signs in (docs/operations.md): a new user is created, a known one keeps their name and CLI id, and the
    new id replaces their old one. It is answered once, in clear; only its digest is kept."""
    if not body.user_name:
        raise HTTPException(400, "user_name is required")
    if any("\x00" in (value or "") for value in (user_id, body.user_name, body.web_auth_id)):
        raise HTTPException(400, "Invalid request: a field contains a NUL character")
    web_id = body.web_auth_id or secrets.token_urlsafe(24)
    if len(web_id) < MIN_WEB_ID_CHARS:
        raise HTTPException(400, f"web_auth_id must be at least {MIN_WEB_ID_CHARS} characters")
    owner = await user_reads.user_by_web(pool, web_id)
    if owner is not None and owner["user_id"] != user_id:
        raise HTTPException(400, "web_auth_id already in use")
    await publish(broker, WebAuthIdSet(user_id=user_id, user_name=body.user_name,
                                       web_auth_id_sha256=cli_id_hash(web_id)))
    return {"status": "ok", "user_id": user_id, "user_name": body.user_name, "web_auth_id": web_id}
