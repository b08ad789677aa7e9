"""Dependencies of the gateway routes: the gateway's state and its parts, identities.

The one place that reads the app's state (`state_of`): everything else receives the GatewayState or a part of it.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

import asyncpg
from fastapi import Depends, Header, HTTPException, Request
from faststream.nats import NatsBroker

from services.core.infrastructure.position import LedgerPosition
from services.core.readmodel import user_reads
from services.gateway.accounts import website
from services.gateway.edge.ratelimit import Limits
from services.gateway.fastpaths.standings_cache import StandingsCache
from services.gateway.settings import GatewaySettings
from services.gateway.state import GatewayState


def state_of(request: Request) -> GatewayState:
    """The gateway's state, as create_app() keeps it on the app."""
    return request.app.state.gateway


# Async on purpose: FastAPI runs a plain `def` dependency in a worker thread, for every request.
async def get_state(request: Request) -> GatewayState:
    return state_of(request)


async def get_settings(request: Request) -> GatewaySettings:
    return state_of(request).settings


async def get_pool(request: Request) -> asyncpg.Pool:
    return state_of(request).pool


async def get_broker(request: Request) -> NatsBroker:
    return state_of(request).broker


async def get_position(request: Request) -> LedgerPosition:
    return state_of(request).position


async def get_standings_cache(request: Request) -> StandingsCache:
    return state_of(request).standings_cache


def limits_of(request: Request) -> Limits:
    return state_of(request).limits


async def limit_auth_init(request: Request) -> None:
    """Dependency of `/auth/init`: pending registrations per client (an IPv4 address or an IPv6 /64), the key the
    pending cap counts by too."""
    limits = limits_of(request)
    limits.unvouched_forwarding(request)  # the first X-Forwarded-For of an unlisted proxy is logged here already
    await limits.auth_init.hit(limits.client(request), "registrations per address")


async def limit_submit(request: Request, user_id: str) -> None:
    await limits_of(request).submit.hit(user_id, "submissions per user")


State = Annotated[GatewayState, Depends(get_state)]
Pool = Annotated[asyncpg.Pool, Depends(get_pool)]
Cache = Annotated[StandingsCache, Depends(get_standings_cache)]
Broker = Annotated[NatsBroker, Depends(get_broker)]
Position = Annotated[LedgerPosition, Depends(get_position)]
Settings = Annotated[GatewaySettings, Depends(get_settings)]


@dataclass(frozen=True)
class User:
    user_id: str
    user_name: str
    banned: bool
    via_cli: bool


async def _identify(pool: asyncpg.Pool, cli_id: str | None, web_id: str | None) -> User | None:
    """The user behind the USER headers (docs/http-api.md "Credentials"): the web id decides when both are present;
    empty counts as absent. None when neither is given; 401 when the one that decides is unknown."""
    if web_id:
        row, via_cli = await user_reads.user_by_web(pool, web_id), False
    elif cli_id:
        row, via_cli = await user_reads.user_by_cli(pool, cli_id), True
    else:
        return None
    if row is None:
        raise HTTPException(401, "Invalid or unauthorized auth header")
    return User(str(row["user_id"]), row["user_name"], row["banned"], via_cli)


async def current_user(
    pool: Pool,
    x_popcorn_cli_id: Annotated[str | None, Header()] = None,
    x_web_auth_id: Annotated[str | None, Header()] = None,
) -> User:
    """USER auth class: a web or a CLI identity is required."""
    user = await _identify(pool, x_popcorn_cli_id, x_web_auth_id)
    if user is None:
        raise HTTPException(400, "Missing X-Web-Auth-Id or X-Popcorn-Cli-Id header")
    return user


async def submitting_user(
    state: State,
    x_popcorn_cli_id: Annotated[str | None, Header()] = None,
    x_web_auth_id: Annotated[str | None, Header()] = None,
) -> User:
    """USER auth class of `POST /submission/...`, the route a website submits through: a web id the website wrote
    into `leaderboard.user_info` at sign-in counts here too (services/gateway/accounts/website.py)."""
    try:
        return await current_user(state.pool, x_popcorn_cli_id, x_web_auth_id)
    except HTTPException as refused:
        if refused.status_code != 401 or not x_web_auth_id:
            raise
        row = await website.signed_in(state.pool, state.broker, state.position, x_web_auth_id,
                                      state.settings.projection_wait_s)
        if row is None:
            raise
        return User(str(row["user_id"]), row["user_name"], row["banned"], via_cli=False)


async def optional_user(
    pool: Pool,
    x_popcorn_cli_id: Annotated[str | None, Header()] = None,
    x_web_auth_id: Annotated[str | None, Header()] = None,
) -> User | None:
    """OPT auth class: anonymous without headers, but a header that is present must be valid."""
    return await _identify(pool, x_popcorn_cli_id, x_web_auth_id)


async def quiet_user(
    pool: Pool,
    x_popcorn_cli_id: Annotated[str | None, Header()] = None,
    x_web_auth_id: Annotated[str | None, Header()] = None,
) -> User | None:
    """NONE class that still reads identity (GET /leaderboards): an invalid header counts as anonymous."""
    try:
        return await _identify(pool, x_popcorn_cli_id, x_web_auth_id)
    except HTTPException:
        return None


async def cli_user(pool: Pool, x_popcorn_cli_id: Annotated[str | None, Header()] = None) -> User:
    """CLI auth class: only X-Popcorn-Cli-Id counts (a web id alone is a missing header)."""
    if not x_popcorn_cli_id:
        raise HTTPException(400, "Missing X-Popcorn-Cli-Id header")
    row = await user_reads.user_by_cli(pool, x_popcorn_cli_id)
    if row is None:
        raise HTTPException(401, "Invalid or unauthorized X-Popcorn-Cli-Id")
    return User(str(row["user_id"]), row["user_name"], row["banned"], True)


CurrentUser = Annotated[User, Depends(current_user)]
SubmittingUser = Annotated[User, Depends(submitting_user)]
OptionalUser = Annotated[User | None, Depends(optional_user)]
CliUser = Annotated[User, Depends(cli_user)]
QuietUser = Annotated[User | None, Depends(quiet_user)]


async def require_admin(settings: Settings, authorization: Annotated[str | None, Header()] = None) -> None:
    token = settings.admin_token.get_secret_value() if settings.admin_token else ""
    if not token:
        raise HTTPException(401, "Admin API is disabled: no admin token is configured")
    if not authorization:
        raise HTTPException(401, "Missing Authorization header")
    if not hmac.compare_digest(authorization.encode(), f"Bearer {token}".encode()):
        raise HTTPException(401, "Invalid admin token")


async def idempotency_key(idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", description="Optional, 1 to 255 printable ASCII characters: a retry with the same key "
        "answers with the submission the first attempt recorded, instead of submitting again.")] = None) -> None:
    """Declares the header on the submit routes, so OpenAPI shows it; intake reads and checks it itself (a malformed
    key is its 400, never a 422 of FastAPI's)."""
